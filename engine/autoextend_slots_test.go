package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// extendBatches is a master that, once armed, holds batches with an
// extension until open is closed, and counts the extension ops that reached
// it while it held them (started: their calls were out at once).
type extendBatches struct {
	transport.Transport
	armed   *atomic.Bool
	open    chan struct{}
	started atomic.Int32
}

func (s *extendBatches) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	var n int32
	for _, op := range ops {
		if op.Kind == transport.Extend {
			n++
		}
	}
	if s.armed.Load() && n > 0 {
		select {
		case <-s.open:
		default:
			s.started.Add(n)
		}
		select {
		case <-s.open:
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
	}
	return s.Transport.Do(ctx, ops, res)
}

// Auto-extensions that fall due together do not all start at once: at most
// the engine's slots are out, and the rest wait, in the order they fell
// due, without running. On a client starved of CPU, a round of n
// extensions started at once puts n goroutines in the run queue ahead of
// the reader, node and coordinator work that would complete the ones
// already sent, and every one of them times out (BENCHMARKS.md, "Held
// locks under load"). Five locks fall due at one instant with two slots
// and the masters holding the extensions: no master may see more than two
// extensions while it holds them (with eight batches in flight a node sends
// each op as it comes, so a master sees every extension whose call is out).
// It counts calls out, not ops in one batch: a call that a quorum answered
// frees its slot while its ops to the other masters may still be queued,
// so once the masters answer, a late node's batch may carry more. Then every
// lock must be extended and none lost.
func TestAutoExtensionsWaitForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			ttl   = time.Second
			locks = 5
			slots = 2
		)
		_, ts := memoryMasters(5)
		var armed atomic.Bool
		open := make(chan struct{})
		ms := make([]*extendBatches, len(ts))
		for i := range ts {
			ms[i] = &extendBatches{Transport: ts[i], armed: &armed, open: open}
			ts[i] = ms[i]
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl),
			api.WithMasterTimeout(time.Minute), api.WithBatching(512, 8))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		engine.SetAutoSlots(e, slots)
		ctx := context.Background()
		var ls []api.Lock
		for i := range locks {
			l, err := e.TryLock(ctx, "k"+string(rune('a'+i)), api.WithAutoExtend(0.5))
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		first := ls[0].Until()
		armed.Store(true)
		time.Sleep(ttl * 6 / 10) // every first extension is due and started
		synctest.Wait()
		for i, m := range ms {
			if n := m.started.Load(); n != slots {
				t.Fatalf("master %d saw %d auto-extensions out at once with %d slots (want %d): the extensions that fell due together did not wait for a slot", i, n, slots, slots)
			}
		}
		close(open)
		synctest.Wait()
		for i, l := range ls {
			select {
			case <-l.Done():
				t.Fatalf("lock %d lost: %v", i, l.Err())
			default:
			}
			if !l.Until().After(first) {
				t.Fatalf("lock %d was not extended once the masters answered (Until %v)", i, l.Until())
			}
		}
	})
}
