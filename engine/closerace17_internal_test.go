package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
)

// heap16's Close race (db474fc): fire takes a lock due for an
// auto-extension out of the heap under sched.mu, lets go of mu and only
// then calls its tick, which takes the lock's sig and, through extendDue,
// mu again. A Close in between collects the heap without that lock, so
// Close does not end it; the tick must, or Done stays open for good: no
// timer is left to close it at Until.
//
// The window lies between the two mutexes, and the test holds it open
// with the first of them: it holds the lock's sig, so the fired tick
// waits on it with the lock out of the heap, closes the engine, then lets
// the tick run (Close, which waits for the fire under way since close24,
// returns after it). No synctest: a goroutine waiting on a sync.Mutex is not
// durably blocked, so synctest.Wait could not tell the tick is there. The
// test reads the scheduler's state instead (under mu).
func TestCloseWhileTickWaitsEndsTheLock(t *testing.T) {
	e, err := NewMemory(3, api.WithoutRestartQuarantine(), api.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// An extension due 100ms after the grant, Until 10s away: the tick
	// finds the extension due, not the lock expired.
	h, err := e.TryLock(context.Background(), "k", api.WithAutoExtend(0.01))
	if err != nil {
		t.Fatal(err)
	}
	l := h.(*lock)
	done := l.Done()

	l.sig.Lock()
	// Wait until fire has taken l out of the heap and is in l.tick, on sig.
	for {
		e.sched.mu.Lock()
		popped := e.sched.firing && l.hidx == 0
		e.sched.mu.Unlock()
		if popped {
			break
		}
		if time.Now().After(l.until) {
			l.sig.Unlock()
			t.Fatal("the scheduler never took the lock out of its heap for its auto-extension")
		}
		time.Sleep(time.Millisecond) // poll: the tick waiting on sig signals nothing
	}
	collected := make(chan struct{})
	var once sync.Once // other engines' Close, should this test fail before it unsets the hook
	testSchedClosed = func() { once.Do(func() { close(collected) }) }
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }() // collects the heap: l is not in it
	// Close waits for the fire under way before it returns (close24), and
	// this fire waits on sig: let it go once Close has collected the heap.
	select {
	case <-collected:
	case <-time.After(5 * time.Second):
		l.sig.Unlock()
		t.Fatal("Close did not collect the scheduler's heap in 5s")
	}
	l.sig.Unlock()
	var cerr error
	select {
	case cerr = <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return 5s after the tick could go on")
	}
	testSchedClosed = nil
	if cerr != nil {
		t.Fatal(cerr)
	}
	// Close returned after the fire, and so the tick, had ended (close24).
	select {
	case <-done:
	default:
		t.Fatalf("Done still open after Close ended the engine while the lock's tick was due (Until %v away, no timer left to close it); Err = %v",
			time.Until(l.Until()).Round(time.Second), l.Err())
	}
	if err := l.Err(); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", err)
	}
}
