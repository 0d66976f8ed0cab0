package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// holdExtensionsOf is a master that, once armed, holds every batch with an
// extension of key until open is closed, and counts the extensions of
// count that reach it.
type holdExtensionsOf struct {
	transport.Transport
	key, count string
	armed      *atomic.Bool
	open       chan struct{}
	counted    *atomic.Int32
}

func (m *holdExtensionsOf) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	hold := false
	for _, op := range ops {
		if op.Kind == transport.Extend && op.Key == m.key {
			hold = true
		}
		if op.Kind == transport.Extend && op.Key == m.count {
			m.counted.Add(1)
		}
	}
	if hold && m.armed.Load() {
		select {
		case <-m.open:
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

// A user's Extend that lands while the lock's due auto-extension waits for
// a slot (autoslots.go) makes that auto-extension needless: the lock was
// just extended. The auto-extension must then not be made anyway. With the
// last of MaxExtensions used by the Extend, making it fails with "the limit
// of 1 extensions is used up", and the lock, valid on the masters until its
// Until, was reported lost at once (Done closed, ErrNotHeld "auto-extension
// failed"): Done must close at Until, not before, when nothing failed. With
// extensions to spare, it was a second extension right behind the user's,
// one of MaxExtensions spent for nothing.
//
// One slot; the lock "hog" falls due first and its extension holds the
// slot (the masters hold it); "b" falls due and waits; b.Extend succeeds;
// the masters let hog's extension through, which frees the slot for b's.
func TestUserExtendWhileAutoExtensionWaitsForSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxExt int
	}{
		{"the Extend used the last extension", 1},
		{"extensions to spare", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = time.Second
				_, ts := memoryMasters(5)
				var armed atomic.Bool
				var counted atomic.Int32
				open := make(chan struct{})
				for i := range ts {
					ts[i] = &holdExtensionsOf{Transport: ts[i], key: "hog", count: "b", armed: &armed, open: open, counted: &counted}
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl),
					api.WithMasterTimeout(time.Minute), api.WithBatching(512, 8))
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				engine.SetAutoSlots(e, 1)
				ctx := context.Background()

				hog, err := e.TryLock(ctx, "hog", api.WithAutoExtend(0.5))
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
				b, err := e.TryLock(ctx, "b", api.WithAutoExtend(0.5), api.WithMaxExtensions(tc.maxExt))
				if err != nil {
					t.Fatal(err)
				}
				armed.Store(true)
				time.Sleep(550 * time.Millisecond) // hog's extension is out (held), b's waits for the slot
				synctest.Wait()
				if n := counted.Load(); n != 0 {
					t.Fatalf("%d extensions of b reached the masters while hog's held the only slot", n)
				}

				if err := b.Extend(ctx); err != nil {
					t.Fatalf("Extend: %v", err)
				}
				extended := b.Until()
				synctest.Wait() // the Extend's ops to the masters past its quorum have landed
				sent := counted.Load()
				close(open) // hog's extension returns; its slot goes to b's waiting one
				synctest.Wait()

				select {
				case <-b.Done():
					t.Fatalf("Done closed %v before Until, with the lock valid and held on every master: %v",
						extended.Sub(time.Now()), b.Err())
				default:
				}
				if extra := counted.Load() - sent; extra != 0 {
					t.Fatalf("the auto-extension that waited for a slot was made right after the user's Extend (%d more extension ops): an extension spent for nothing", extra)
				}
				if err := b.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				if err := hog.Unlock(ctx); err != nil && !errors.Is(err, api.ErrNotHeld) {
					t.Fatalf("Unlock hog: %v", err)
				}
			})
		})
	}
}
