package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// notSent is a master whose client is late for the batches holding an op
// that matches, a given number of times: each such batch fails at once with
// transport.ErrNotSent, unseen by the master, as transport/redis fails a
// batch that reached Do after its deadline on a CPU-starved client. Later
// batches, and every other batch, are served.
type notSent struct {
	transport.Transport
	match func(transport.Op) bool
	left  *atomic.Int32 // batches still to fail
}

func (n notSent) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if slices.ContainsFunc(ops, n.match) && n.left.Add(-1) >= 0 {
		return transport.Fail(res, fmt.Errorf("late client: %w", transport.ErrNotSent))
	}
	return n.Transport.Do(ctx, ops, res)
}

// A release that the client did not send (transport.ErrNotSent) is sent
// again by the Unlock, at most maxResends (8) times; the next not-sent
// reply counts as a failure. If a majority released meanwhile, Unlock
// returns nil, and the key must still leave that master (house rule: no key
// left on a master after an Unlock): no master saw the release, and the
// master is up (the lateness was the client's), so it is not one of the
// down masters that unlockLeft leaves to the TTL. Master 3's client misses
// the deadline of nine releases in a row, then is on time again.
func TestUnlockReleaseNotSentPastResendsIsCleaned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts := memoryMasters(5)
		var left atomic.Int32
		ts[3] = notSent{ts[3], func(op transport.Op) bool {
			return op.Kind == transport.Release && op.Key == "k17"
		}, &left}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "k17", api.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // master 3's SET has landed
		if ms[3].Len() != 1 {
			t.Fatalf("master 3 holds %d keys after TryLock; want the lock's", ms[3].Len())
		}
		left.Store(9) // the first send and the Unlock's 8 resends
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock with four of five masters releasing: %v; want nil", err)
		}
		synctest.Wait()
		if left.Load() > 0 {
			t.Fatalf("the Unlock sent master 3's release %d times; the test needs all 9 not sent", 9-left.Load())
		}
		const bound = 10 * time.Second // many background cleanups, far below the TTL of 1h
		start := time.Now()
		for ms[3].Len() != 0 {
			if time.Since(start) > bound {
				t.Fatalf("master 3 still holds the lock's key %v after an Unlock that returned nil (its release was not sent, by a late client, more times than the Unlock resends; TTL 1h)", bound)
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
	})
}
