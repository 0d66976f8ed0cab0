package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
)

// timedOutRelease fails every release of its key, unapplied, as a timeout
// after wait, while on: the release of a CPU-starved client that found its
// deadline passed before it wrote (transport/redis reports that as "no
// answer: context deadline exceeded"), which the engine counts as a slow
// master, not a down one.
type timedOutRelease struct {
	transport.Transport
	key  string
	wait time.Duration
	on   *atomic.Bool
}

func (l timedOutRelease) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if l.on.Load() {
		for _, op := range ops {
			if op.Kind == transport.Release && op.Key == l.key {
				time.Sleep(l.wait)
				return transport.Fail(res, fmt.Errorf("no answer: %w", context.DeadlineExceeded))
			}
		}
	}
	return l.Transport.Do(ctx, ops, res)
}

// An Unlock still waiting for a master when the engine closes, whose
// release already timed out on another master that is slow, not down: the
// engine abandons the Unlock (ErrClosed), no background cleanup follows
// Close, and the slow master's last release comes from releaseAtClose
// (actors/closeleft.go, unlockLeft while closing). Master 3 times out the
// release unapplied at a quarter of the master timeout; master 4 answers it
// only at half, so the Unlock is still out when Close comes in between.
// Close must leave no key on master 3 (TTL 1h: it cannot expire meanwhile).
func TestUnlockClosingSlowReleaseSentAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		ms, inner := memoryMasters(5)
		var failing atomic.Bool
		ts := make([]transport.Transport, len(inner))
		copy(ts, inner)
		ts[3] = timedOutRelease{Transport: inner[3], key: "k17", wait: timeout / 4, on: &failing}
		slow4 := faulty.Wrap(inner[4], faulty.Config{})
		ts[4] = slow4
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "k17", api.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every master's SET lands
		for i, m := range ms {
			if m.Len() != 1 {
				t.Fatalf("master %d holds %d keys after TryLock; want the lock's", i, m.Len())
			}
		}
		failing.Store(true)
		slow4.SetLatency(timeout/2, 0) // answered and applied, but after master 3 timed out
		unlocked := make(chan error, 1)
		go func() { unlocked <- l.Unlock(ctx) }()
		time.Sleep(timeout * 3 / 8) // master 3 has timed out (slow), master 4 not answered
		synctest.Wait()
		select {
		case err := <-unlocked:
			t.Fatalf("Unlock returned %v before master 4 answered: the test's premise is broken", err)
		default:
		}
		if ms[3].Len() != 1 || ms[4].Len() != 1 {
			t.Fatalf("masters 3 and 4 hold %d and %d keys before Close; want the lock's on both (3's release failed, 4's is out)", ms[3].Len(), ms[4].Len())
		}
		failing.Store(false) // master 3 is quick again
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-unlocked; !errors.Is(err, api.ErrClosed) {
			t.Fatalf("Unlock cut by Close: %v; want ErrClosed", err)
		}
		for i, m := range ms {
			if m.Len() != 0 {
				t.Errorf("master %d holds %d keys after an Unlock cut by Close (TTL 1h): master 3's release timed out while it was slow, and Close did not send it its last release", i, m.Len())
			}
		}
	})
}
