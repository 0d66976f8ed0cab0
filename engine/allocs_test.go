package engine_test

import (
	"context"
	"testing"
)

// raceEnabled is set by race_test.go: the race detector's sync.Pool drops
// a quarter of what it is given, so pooled objects are allocated again.
var raceEnabled bool

// A lock cycle on the memory masters allocates the lock handle and nothing
// else: the Calls and reply messages are pooled, and each coordinator
// reuses the requests it fans out once every master has answered them
// (actors/reqpool.go). `make test` runs this without the race detector.
func TestLockCycleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	e := newMemory(t, 5)
	ctx := context.Background()
	cycle := func() {
		l, err := e.TryLock(ctx, "allocs")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		cycle() // fill the pools and free lists
	}
	// 1 is the handle; the rest of the margin is for a pool emptied by a
	// collection during the run. Before the requests were reused: 3.
	if n := testing.AllocsPerRun(2000, cycle); n >= 1.5 {
		t.Errorf("a TryLock and Unlock cycle allocates %.2f times, want 1 (the lock handle)", n)
	}
}
