package engine

import (
	"testing"
	"time"
)

// HoldLockTimers makes the scheduler timer of every engine that arms it
// from now on (until t's cleanup), which runs every watched lock's events
// (sched.go), send on fired each time it is due and then wait for release
// before it runs: the late wake-up of a starved process, in which the
// timer's goroutine runs after others due at the same moment. Set it before
// the engine whose locks it holds is made, and close release before the
// test ends.
func HoldLockTimers(t testing.TB, fired chan<- struct{}, release <-chan struct{}) {
	old := afterFunc
	afterFunc = func(d time.Duration, f func()) *time.Timer {
		return old(d, func() {
			fired <- struct{}{}
			<-release
			f()
		})
	}
	t.Cleanup(func() { afterFunc = old })
}
