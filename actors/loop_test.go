package actors

import (
	"sync"
	"testing"
)

// A loop runs what it is handed, in order, on its one goroutine; stop ends
// that goroutine; a wake handed over after stop still runs (the slot's
// fallback), so nothing scheduled is lost while the loop is alive.
func TestLoopRunsInOrderAndStops(t *testing.T) {
	l := newLoop()
	var got []int
	for i := range 100 {
		done := make(chan struct{})
		l.Schedule(func() { got = append(got, i); close(done) })
		<-done
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("run %d was wake %d", i, v)
		}
	}
	l.stop()
	select {
	case <-l.done:
	default:
		t.Fatal("the goroutine is still running after stop")
	}
	// The slot takes one wake that nobody runs; the next falls back to a
	// goroutine of its own.
	l.Schedule(func() {})
	var wg sync.WaitGroup
	wg.Add(1)
	l.Schedule(wg.Done)
	wg.Wait()
}
