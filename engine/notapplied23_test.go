package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// notApplied is a master that refuses the first n releases of key unapplied
// with transport.ErrNotApplied, as transport/redis does for a release that
// met NOSCRIPT before a later op of its key that ran in the same batch, and
// transport/rediscluster for one that met MOVED or ASK so; the batch's
// other ops are served. A release of key that is not refused (the test
// arms left before the first) closes served once it has been served.
type notApplied struct {
	transport.Transport
	key    string
	left   *atomic.Int32
	served chan struct{}
	once   *sync.Once
}

func (n notApplied) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	var refused []int
	passed := false // a release of key after the refusals: served below
	for i, op := range ops {
		if op.Kind == transport.Release && op.Key == n.key {
			if n.left.Add(-1) >= 0 {
				refused = append(refused, i)
			} else {
				passed = true
			}
		}
	}
	if passed {
		defer n.once.Do(func() { close(n.served) })
	}
	if len(refused) == 0 {
		return n.Transport.Do(ctx, ops, res)
	}
	// Serve the rest as one batch, then fill in the refused ones.
	var rest []transport.Op
	var at []int
	for i, op := range ops {
		if len(refused) > 0 && refused[0] == i {
			refused = refused[1:]
			res[i] = transport.Result{Err: fmt.Errorf("master: release %q: NOSCRIPT, %w", op.Key, transport.ErrNotApplied)}
			continue
		}
		rest = append(rest, op)
		at = append(at, i)
	}
	if len(rest) == 0 {
		return nil
	}
	sub := make([]transport.Result, len(rest))
	err := n.Transport.Do(ctx, rest, sub)
	for j, i := range at {
		res[i] = sub[j]
	}
	return err
}

// An Unlock's release that a master refused unapplied, the master up
// (transport.ErrNotApplied), must be sent again: the key is still there.
// Unlock returns nil once a majority released, and the key must then leave
// that master too (house rule: no key left on a master after an Unlock),
// not stay for its TTL as behind a master that is down.
func TestUnlockReleaseNotAppliedIsCleaned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts := memoryMasters(5)
		var left atomic.Int32
		served := make(chan struct{})
		ts[2] = notApplied{ts[2], "k23", &left, served, new(sync.Once)}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "k23", api.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if ms[2].Len() != 1 {
			t.Fatalf("master 2 holds %d keys after TryLock; want the lock's", ms[2].Len())
		}
		left.Store(1)
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock with four of five masters releasing: %v; want nil", err)
		}
		synctest.Wait()
		if left.Load() > 0 {
			t.Fatal("the Unlock's release never reached master 2; the test needs it refused once")
		}
		const bound = 10 * time.Second // background cleanups, far below the TTL of 1h
		select {
		case <-served: // the release went to master 2 again
		case <-time.After(bound): // the bubble's clock
			t.Fatalf("no release of the lock's key reached master 2 in %v after it refused one unapplied (TTL 1h)", bound)
		}
		synctest.Wait()
		if ms[2].Len() != 0 {
			t.Fatalf("master 2 still holds the lock's key %v after an Unlock that returned nil (its release was refused once unapplied, the master up: transport.ErrNotApplied; TTL 1h)", bound)
		}
	})
}
