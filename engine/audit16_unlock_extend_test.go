package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lateExtensions is a master whose extensions reach it only once open is
// closed, while the client has long given them up: a batch with an
// extension fails at once (as at its deadline), and is applied later, as a
// request held in a cut connection still reaches Redis (faultproxy's cut).
// Every other op is applied at once, so the release that Unlock sends
// after it overtakes it.
type lateExtensions struct {
	transport.Transport
	open chan struct{}
	wg   *sync.WaitGroup
}

var errExtensionHeld = errors.New("the extension is held in the connection")

func (m *lateExtensions) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.Extend || op.Kind == transport.ExtendShared {
			held := append([]transport.Op(nil), ops...)
			m.wg.Go(func() {
				<-m.open
				_ = m.Transport.Do(context.Background(), held, make([]transport.Result, len(held)))
			})
			return transport.Fail(res, errExtensionHeld)
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

func (m *lateExtensions) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(m.Transport)
}

// An extension that lands on a master after the lock's Unlock released it
// there re-creates nothing: "no key left after Unlock" holds even though
// an auto-extension can succeed on a quorum while its op to another master
// was given up by the client yet still reaches that master later, after
// the release that Unlock sent it. (The node sends a key's release only
// after the key's previous batch returned, so on one connection it
// follows; a request held in a cut connection, or sent on one that was
// replaced, can still arrive after it.) What protects it is that every
// extension is a compare-and-extend on the lock's own value
// (transport.Extend, ExtendShared), and values are never reused. A mutex,
// a reader, a writer and a semaphore permit, each auto-extended while
// master 5's extensions arrive late.
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
				var wg sync.WaitGroup
				ts[4] = &lateExtensions{Transport: ts[4], open: open, wg: &wg}
				var once sync.Once
				release := func() { once.Do(func() { close(open) }); wg.Wait() }
				defer release()
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
				release() // master 5's extension lands after its release
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
