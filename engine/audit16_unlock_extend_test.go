package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lateExtensions is a master that holds every batch with an extension
// until open is closed: its extensions land after whatever the engine sent
// it meanwhile.
type lateExtensions struct {
	transport.Transport
	open chan struct{}
}

func (m *lateExtensions) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.Extend || op.Kind == transport.ExtendShared {
			select {
			case <-m.open:
			case <-ctx.Done():
				return transport.Fail(res, ctx.Err())
			}
			break
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

func (m *lateExtensions) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(m.Transport)
}

// An extension that lands on a master after the lock's Unlock released it
// there re-creates nothing: "no key left after Unlock" holds even though
// an auto-extension's call ends at its quorum while its op to a slow master
// is still out, and Unlock (which waits for the handle, not for that op)
// sends the release to that master in another batch, which overtakes it.
// What protects it is that every extension is a compare-and-extend on the
// lock's own value (transport.Extend, ExtendShared) and values are never
// reused. A mutex, a reader, a writer and a semaphore permit, each
// auto-extended while master 5 holds its extensions back.
func TestExtensionLandingAfterUnlockLeavesNoKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		take func(context.Context, *engine.Engine, ...api.LockOption) (api.Lock, error)
	}{
		{"mutex", func(ctx context.Context, e *engine.Engine, o ...api.LockOption) (api.Lock, error) {
			return e.TryLock(ctx, "k", o...)
		}},
		{"reader", func(ctx context.Context, e *engine.Engine, o ...api.LockOption) (api.Lock, error) {
			return e.TryRLock(ctx, "k", o...)
		}},
		{"writer", func(ctx context.Context, e *engine.Engine, o ...api.LockOption) (api.Lock, error) {
			return e.TryWLock(ctx, "k", o...)
		}},
		{"permit", func(ctx context.Context, e *engine.Engine, o ...api.LockOption) (api.Lock, error) {
			return e.TrySemaphore(ctx, "k", 3, o...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = time.Second
				ms, ts := memoryMasters(5)
				open := make(chan struct{})
				ts[4] = &lateExtensions{Transport: ts[4], open: open}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl),
					api.WithMasterTimeout(time.Minute), api.WithBatching(512, 8))
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				ctx := context.Background()
				l, err := tc.take(ctx, e, api.WithAutoExtend(0.5))
				if err != nil {
					t.Fatal(err)
				}
				first := l.Until()
				time.Sleep(ttl * 6 / 10) // the auto-extension is due, and done by masters 1-4
				synctest.Wait()
				if !l.Until().After(first) {
					t.Fatalf("not auto-extended by four masters of five (Until %v, was %v)", l.Until(), first)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				close(open) // master 5's extension lands after its release
				synctest.Wait()
				for i, m := range ms {
					if n := m.Len(); n != 0 {
						t.Fatalf("master %d holds %d keys after Unlock: an extension that landed after the release re-created the lock", i+1, n)
					}
				}
			})
		})
	}
}
