package torture

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
)

// Regression tests for the engine bugs the torture and its tools found
// (SAFETY.md, "Findings"; fixed in 1fa88a1).

// TestErrAfterUntilWithoutDone (F2): Done's timer is armed by the first
// call of Done, and Err used to report only what that timer set, so a holder
// that never called Done and checked Err before acting (if l.Err() == nil {
// write() }) was told its lock was fine long after Until.
func TestErrAfterUntilWithoutDone(t *testing.T) {
	synctest.Test(t, testErrAfterUntilWithoutDone)
}

func testErrAfterUntilWithoutDone(t *testing.T) {
	e, err := engine.NewMemory(5, api.WithTTL(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(l.Until()) + time.Nanosecond) // fake time: just past Until
	if l.Err() == nil {
		t.Errorf("Err() = nil %v after Until: the holder is not told its lock ran out", time.Since(l.Until()).Round(time.Millisecond))
	}
}

// TestRestartQuarantineHoldsForItsPeriod (F1): Redis's uptime_in_seconds is
// the difference of two truncated wall-clock seconds, so it reads 1 a few
// milliseconds after a start just before a second boundary. The quarantine
// took it as the uptime, re-estimating the start at every check, so a
// restarted master voted up to a second early: with the period equal to the
// TTL (1s), almost at once, and a second owner got a lock whose first owner
// was still valid (5 of 10 rounds before the fix).
//
// Each round: engine a holds k on all five masters; three are killed and
// restarted empty just before a wall-clock second boundary (where the old
// estimate went wrong at the next periodic check); engine b tries k every
// 2ms while a's lock is valid, and must never get it.
func TestRestartQuarantineHoldsForItsPeriod(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts real masters for several seconds")
	}
	ctx := context.Background()
	servers, err := redisproc.Start(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer redisproc.StopAll(servers)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	newEngine := func() *engine.Engine {
		e, err := engine.New(addrs, api.WithTTL(time.Second), api.WithRestartQuarantine(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// A poll: the end of real masters' quarantine is time passing.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			l, err := e.TryLock(ctx, "probe")
			if err == nil {
				_ = l.Unlock(ctx)
				return e
			}
			if time.Now().After(deadline) {
				t.Fatalf("masters never voted: %v", err)
			}
		}
	}
	a, b := newEngine(), newEngine()
	defer a.Close()
	defer b.Close()
	for round := range 3 {
		// Restart about 120ms before a wall-clock second boundary (Redis's
		// uptime is wall-clock seconds: the time is the subject here).
		now := time.Now()
		time.Sleep(time.Second - time.Duration(now.Nanosecond()) - 120*time.Millisecond + func() time.Duration {
			if now.Nanosecond() > int(880*time.Millisecond) {
				return time.Second
			}
			return 0
		}())
		held, err := a.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []int{1, 3, 4} {
			if err := servers[m].Restart(ctx); err != nil { // kill -9, then start empty
				t.Fatal(err)
			}
		}
		restarted := time.Now()
		for time.Now().Before(held.Until()) {
			if second, err := b.TryLock(ctx, "k"); err == nil {
				t.Errorf("round %d: a second owner got k %v after three masters restarted (quarantine 1s), while the first is valid for %v more",
					round, time.Since(restarted).Round(time.Millisecond), time.Until(held.Until()).Round(time.Millisecond))
				_ = second.Unlock(ctx)
				break
			}
			time.Sleep(2 * time.Millisecond) // b's retries, 2ms apart, for as long as a's lock is valid
		}
		_ = held.Unlock(ctx)
	}
}
