package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/redistest"
)

// A release that times out on a slow master after a majority released it
// must still reach that master (house rule: no key left on a master after an
// Unlock; api.Lock.Unlock "releases the lock on every master"). Master 3's
// release waits in its link past the master timeout and is never applied,
// as a batch is on a CPU-starved client whose write comes too late
// (transport/redis fails such a batch as "no answer", not as
// transport.ErrNotSent). Four masters released, so Unlock returns nil; the
// key must then leave master 3 once it is quick again, well within the
// lock's TTL, not stay there for that TTL.
func TestUnlockSlowMinorityReleaseIsResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		e, fs, ms := slowMasters(t)
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "k16", api.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // TryLock returns on a majority: let master 3's SET land first
		if ms[3].Len() != 1 {
			t.Fatalf("master 3 holds %d keys after TryLock; want the lock's", ms[3].Len())
		}
		fs[3].SetLatency(10*timeout, 0) // the release's batch outlives its deadline unsent
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock with four of five masters quick: %v; want nil", err)
		}
		synctest.Wait()
		if ms[3].Len() == 0 {
			t.Fatal("master 3 applied a release that the fault kept from it: the test's premise is broken")
		}
		fs[3].SetLatency(0, 0)
		// The bound is many background cleanups (cleanupMaxWait is 1s) and
		// far below the TTL, by which the key would go on its own.
		const bound = 10 * time.Second
		start := time.Now()
		for ms[3].Len() != 0 {
			if time.Since(start) > bound {
				t.Fatalf("master 3 still holds the lock's key %v after an Unlock that returned nil (its release timed out unapplied; TTL 1h): a release that timed out after a majority released is never sent again", bound)
			}
			time.Sleep(timeout)
			synctest.Wait()
		}
		for i, m := range ms {
			if m.Len() != 0 {
				t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
			}
		}
	})
}

// keysGone waits until no master holds a key, for at most bound (which must
// be well below the keys' TTL, or a key left behind would pass by expiring):
// after an Unlock, a release that timed out on a slow master reaches it late
// or from the background cleanup.
func keysGone(t *testing.T, servers []*redistest.Server, bound time.Duration) {
	t.Helper()
	start := time.Now()
	for i := 0; i < len(servers); {
		n := servers[i].DBSize(t)
		if n == 0 {
			i++
			continue
		}
		if time.Since(start) > bound {
			t.Fatalf("master %d still holds %d keys %v after Unlock", i, n, bound)
		}
		time.Sleep(10 * time.Millisecond) // poll: nothing reports a background release's landing
	}
}
