package engine_test

import (
	"context"
	"errors"
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

// heldErr is a context whose Err, the first time it is asked, says it was
// asked (on asked) and answers only once told to (on answer), then reports
// the context cancelled: an Unlock given it holds the handle's mutex,
// which it takes before it looks at its context, for as long as the test
// wants, as an Unlock whose context ended does for an instant.
type heldErr struct {
	context.Context
	asked, answer chan struct{}
	once          atomic.Bool
}

func (c *heldErr) Err() error {
	if c.once.CompareAndSwap(false, true) {
		close(c.asked)
		<-c.answer
	}
	return context.Canceled
}

// The due auto-extension's worker skips a lock whose handle is taken (the
// user's Extend or Unlock has it), counting on Extend to re-arm and on
// Unlock to end the lock. Here the worker looks while an Unlock whose
// context has ended has the handle. review17 had such an Unlock return its
// context's error and leave the lock held, so the auto-extension had to go
// on; since handle_test.go's review an Unlock gives the lock up whatever
// its context: it releases, the lock ends as released, and the skipped
// auto-extension does not bring it back.
func TestCancelledUnlockWithAutoExtensionDueReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fired, release := make(chan struct{}), make(chan struct{})
		engine.HoldLockTimers(t, fired, release)
		_, ts := memoryMasters(5)
		const ttl = time.Second
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithMasterTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		l, err := e.Lock(context.Background(), "auto17", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		<-fired // the first auto-extension is due; its timer waits
		ctx := &heldErr{Context: context.Background(), asked: make(chan struct{}), answer: make(chan struct{})}
		unlocked := make(chan error, 1)
		go func() { unlocked <- l.Unlock(ctx) }()
		<-ctx.asked // Unlock has the handle
		close(release)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // later firings go through
			for {
				select {
				case <-fired:
				case <-stop:
					return
				}
			}
		}()
		synctest.Wait() // the worker has looked at the lock, and left it
		close(ctx.answer)
		if err := <-unlocked; err != nil {
			t.Fatalf("Unlock with a cancelled context: %v, want the lock released", err)
		}
		time.Sleep(2 * ttl)
		synctest.Wait()
		if err := l.Err(); !errors.Is(err, api.ErrReleased) {
			t.Fatalf("an auto-extended lock unlocked with a cancelled context while its extension was due: Err = %v, want ErrReleased", err)
		}
		other, err := e.TryLock(context.Background(), "auto17")
		if err != nil {
			t.Fatalf("the key is held %v after an Unlock with a cancelled context: %v", 2*ttl, err)
		}
		_ = other.Unlock(context.Background())
	})
}
