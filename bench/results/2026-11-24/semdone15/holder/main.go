// The torture's overrun, reduced: a lock's timer (time.AfterFunc, as the
// engine's) due at T closes done; the holder waits on done and its own
// timer (time.NewTimer in a select, as internal/torture's work) due at
// T+hold. Count the rounds in which the holder woke from its own timer and
// found done still open, with how late its own timer was.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func main() {
	rounds, _ := strconv.Atoi(os.Args[1])
	hold, _ := time.ParseDuration(os.Args[2])
	var open, timerLate, worst int
	var worstSelf, worstDone time.Duration
	for r := 0; r < rounds; r++ {
		done := make(chan struct{})
		var closedAt atomic.Int64
		T := time.Now().Add(10 * time.Millisecond)
		time.AfterFunc(time.Until(T), func() { closedAt.Store(int64(time.Since(T))); close(done) })
		due := T.Add(hold)
		t := time.NewTimer(time.Until(due))
		select {
		case <-done:
			t.Stop()
			continue
		case <-t.C:
		}
		self := time.Since(due)
		select {
		case <-done:
		default:
			open++
			if self < hold {
				// its own timer was less late than the signal: the signal's
				// goroutine lagged the holder's wake-up
				timerLate++
			}
			<-done
			d := time.Duration(closedAt.Load())
			if d-self > worstDone-worstSelf {
				worstDone, worstSelf = d, self
				worst = r
			}
		}
	}
	fmt.Printf("rounds %d hold %v: holder woke by its own timer with done open: %d (own timer less late than hold: %d); round with done most late beyond the holder's own lateness, %d: done closed %v after T, holder's own timer %v late\n",
		rounds, hold, open, timerLate, worst, worstDone.Round(time.Microsecond), worstSelf.Round(time.Microsecond))
}
