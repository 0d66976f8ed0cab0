package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// How a lock's end is counted (review observe and timeedges, 2026-11-29),
// in synctest bubbles: the sleeps below pass in the bubble's clock.
// OBSERVABILITY.md: a lock nobody watches "counts in redlock.lock.held"
// until something looks (Err, Extend, Unlock, Close), "and its loss is
// counted then".

// The everyday `defer l.Unlock(ctx)` after a critical section that overran
// the TTL: the lock expired, and must be counted so, not as released.
func TestExpiredThenUnlockCountedAsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		e := newMemory(t, 3, tm.opts...)
		ctx := context.Background()
		l, err := e.Lock(ctx, "k", api.WithTTL(30*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond) // the critical section overran the TTL
		if err := l.Unlock(ctx); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("Unlock after expiry: %v, want ErrNotHeld", err)
		}
		if !errors.Is(l.Err(), api.ErrExpired) {
			t.Errorf("Err after an Unlock past Until: %v, want ErrExpired", l.Err())
		}
		ms := tm.collect(t)
		wantValue(t, ms, 0, "redlock.lock.held")
		wantCount(t, ms, 1, "redlock.lock.hold.duration", "redlock.end=expired")
		wantCount(t, ms, 0, "redlock.lock.hold.duration", "redlock.end=released")
		wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=expired")
	})
}

// The same expiry looked at through Extend, which says "not held": the
// lock is no longer held, nor counted so.
func TestExpiredThenExtendCountedAsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		e := newMemory(t, 3, tm.opts...)
		ctx := context.Background()
		l, err := e.Lock(ctx, "k", api.WithTTL(30*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
		if err := l.Extend(ctx); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("Extend after expiry: %v, want ErrNotHeld", err)
		}
		ms := tm.collect(t)
		wantValue(t, ms, 0, "redlock.lock.held")
		wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=expired")
	})
}

// refuseExtends answers every Extend "not held", as masters that lost the
// key do.
type refuseExtends struct{ transport.Transport }

func (r refuseExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if err := r.Transport.Do(ctx, ops, res); err != nil {
		return err
	}
	for i, op := range ops {
		if op.Kind == transport.Extend {
			res[i] = transport.Result{}
		}
	}
	return nil
}

// An auto-extended lock is on the scheduler before TryLock returns, and
// its worker may end it at once (here every extension is refused). The
// hold's start, written as TryLock returns, must be ordered with the
// worker's read of it (-race), and a lock lost first must still come off
// redlock.lock.held.
func TestAutoExtendedLockLostEarlyIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		_, ts := memoryMasters(3)
		for i := range ts {
			ts[i] = refuseExtends{ts[i]}
		}
		e, err := engine.NewWithTransports(ts, append([]api.Option{api.WithoutRestartQuarantine(), api.WithTTL(200 * time.Millisecond)}, tm.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if _, err := e.TryLock(context.Background(), "k", api.WithAutoExtend(0.01)); err != nil {
			t.Fatal(err)
		}
		// Nothing touches the handle after TryLock (Done or Err would order
		// the write before the worker's read); the first auto-extension, due
		// after 2ms, is refused long before this sleep ends.
		time.Sleep(100 * time.Millisecond)
		ms := tm.collect(t)
		wantValue(t, ms, 0, "redlock.lock.held")
		wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=extension_failed")
	})
}
