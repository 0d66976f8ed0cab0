// Does a time.AfterFunc callback (run as a new goroutine: put in runnext,
// and kicked to the local run queue's tail by the next goroutine readied on
// its P) run as promptly as a goroutine blocked on a timer channel (the
// torture's probe, and a holder's own timer), while the process launches
// goroutines the way an actor dispatcher does?
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

var base = time.Now()

func now() time.Duration { return time.Since(base) }

// probe: a 2ms timer-channel loop recording each wake-up's due and run.
type wake struct{ due, ran time.Duration }

var (
	pmu   sync.Mutex
	wakes []wake
)

func probe(stop *atomic.Bool) {
	t := time.NewTimer(2 * time.Millisecond)
	for !stop.Load() {
		due := now() + 2*time.Millisecond
		<-t.C
		r := now()
		pmu.Lock()
		wakes = append(wakes, wake{due, r})
		pmu.Unlock()
		t.Reset(2 * time.Millisecond)
	}
}

// stallAt: how late the probe wake-up pending at 'at' ran (0 if none was
// due by 'at'); it waits until the probe has run a wake-up at or after 'at'.
func stallAt(at time.Duration) time.Duration {
	for {
		pmu.Lock()
		ok := len(wakes) > 0 && wakes[len(wakes)-1].ran >= at
		if ok {
			defer pmu.Unlock()
			for _, w := range wakes {
				if w.due <= at && w.ran >= at {
					return w.ran - w.due
				}
			}
			return 0
		}
		pmu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func main() {
	chains, _ := strconv.Atoi(os.Args[1])
	rounds, _ := strconv.Atoi(os.Args[2])
	var stop atomic.Bool
	for i := 0; i < chains; i++ {
		go func() {
			for !stop.Load() {
				ch := make(chan struct{})
				go func() { spin(50 * time.Microsecond); close(ch) }()
				<-ch
			}
		}()
	}
	go probe(&stop)
	time.Sleep(100 * time.Millisecond)
	var afterLate, chanLate, excess []time.Duration
	unexplained := 0
	for round := 0; round < rounds; round++ {
		due := time.Now().Add(20 * time.Millisecond)
		dueR := due.Sub(base)
		got := make(chan time.Duration, 1)
		time.AfterFunc(time.Until(due), func() { got <- time.Since(due) })
		w := make(chan time.Duration, 1)
		go func() {
			t := time.NewTimer(time.Until(due))
			<-t.C
			w <- time.Since(due)
		}()
		a, c := <-got, <-w
		time.Sleep(5 * time.Millisecond)
		s := stallAt(dueR)
		afterLate = append(afterLate, a)
		chanLate = append(chanLate, c)
		excess = append(excess, a-s)
		if a-s > 20*time.Millisecond {
			unexplained++
		}
	}
	stop.Store(true)
	q := func(s []time.Duration) string {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return fmt.Sprintf("p50 %v p90 %v max %v", s[len(s)/2].Round(10*time.Microsecond), s[len(s)*9/10].Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
	}
	fmt.Printf("GOMAXPROCS=%d chains=%d rounds=%d\n  AfterFunc callback late:         %s\n  timer-channel waiter (same due): %s\n  AfterFunc lateness minus probe stall at due: %s\n  rounds with AfterFunc >20ms later than the probe's stall: %d\n",
		runtime.GOMAXPROCS(0), chains, rounds, q(afterLate), q(chanLate), q(excess), unexplained)
}
