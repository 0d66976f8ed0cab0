package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// extendLog is a master that, once armed, holds every batch with an
// extension in it until open is closed (a client too starved to get its
// batches out), and counts the extensions that reach the master, by key.
type extendLog struct {
	transport.Transport
	armed *atomic.Bool
	open  chan struct{}
	mu    *sync.Mutex
	sent  map[string]int
}

func (s *extendLog) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if s.armed.Load() && hasExtend(ops) {
		select {
		case <-s.open:
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
	}
	s.mu.Lock()
	for _, op := range ops {
		if op.Kind == transport.Extend {
			s.sent[op.Key]++
		}
	}
	s.mu.Unlock()
	return s.Transport.Do(ctx, ops, res)
}

// An auto-extension still waiting in a node's queue when its lock's
// validity ends is not sent: the lock is already reported lost (Done closed
// at Until), so the extension can no longer keep it, and on a client that
// is behind its extensions every batch slot spent on such a one delays
// those of locks that are still valid (BENCHMARKS.md, "Held locks under
// load"). Lock a's extension is held in flight (one batch in flight per
// master), lock b's waits behind it past b's Until; once the masters answer
// again, b's extension must not reach them, and b must have been reported
// lost at its Until.
func TestExpiredAutoExtensionNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		_, ts := memoryMasters(5)
		var armed atomic.Bool
		var mu sync.Mutex
		open := make(chan struct{})
		sent := map[string]int{}
		for i := range ts {
			ts[i] = &extendLog{Transport: ts[i], armed: &armed, open: open, mu: &mu, sent: sent}
		}
		// A long master timeout: the held batch must stay in flight, not
		// time out and free the slot.
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl),
			api.WithMasterTimeout(time.Minute), api.WithBatching(512, 1))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		a, err := e.TryLock(ctx, "a", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		time.Sleep(ttl / 10)
		b, err := e.TryLock(ctx, "b", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		bUntil := b.Until()

		time.Sleep(time.Until(bUntil))
		synctest.Wait()
		for name, l := range map[string]api.Lock{"a": a, "b": b} {
			select {
			case <-l.Done():
			default:
				t.Fatalf("lock %s is not reported lost at its Until although no extension got through", name)
			}
			if !errors.Is(l.Err(), api.ErrExpired) {
				t.Fatalf("lock %s: Err = %v, want ErrExpired", name, l.Err())
			}
		}
		time.Sleep(ttl / 10)
		close(open)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		if sent["a"] != 5 {
			t.Fatalf("a's extension reached %d masters, want 5 (the batch held in flight): the test did not hold it", sent["a"])
		}
		if n := sent["b"]; n > 0 {
			t.Fatalf("b's auto-extension went to %d masters after b's validity had ended (b was reported lost at %v): a batch slot spent on an extension that could no longer keep its lock", n, bUntil)
		}
	})
}
