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
)

// exportedSentinels is every error value package api exports, and the
// context errors an api.Error may wrap instead.
var exportedSentinels = []struct {
	name string
	err  error
}{
	{"ErrNotAcquired", api.ErrNotAcquired},
	{"ErrQuorumUnreachable", api.ErrQuorumUnreachable},
	{"ErrNotHeld", api.ErrNotHeld},
	{"ErrInvalidArgument", api.ErrInvalidArgument},
	{"ErrClosed", api.ErrClosed},
	{"ErrExpired", api.ErrExpired},
	{"ErrReleased", api.ErrReleased},
	{"ErrQuarantined", api.ErrQuarantined},
	{"ErrUnsafeMaster", api.ErrUnsafeMaster},
	{"ErrErrorReply", api.ErrErrorReply},
	{"ErrInternal", api.ErrInternal},
	{"context.Canceled", context.Canceled},
	{"context.DeadlineExceeded", context.DeadlineExceeded},
}

// sentinelsOf names the sentinels errors.Is finds in err.
func sentinelsOf(err error) []string {
	var out []string
	for _, s := range exportedSentinels {
		if errors.Is(err, s.err) {
			out = append(out, s.name)
		}
	}
	return out
}

// downForExtends fails every batch with an Extend in it at once, as a
// master that cannot be reached, once on is set.
type downForExtends struct {
	transport.Transport
	on *atomic.Bool
}

func (d *downForExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if d.on.Load() && hasExtend(ops) {
		return transport.Fail(res, fmt.Errorf("%w: test: extensions cut off", transport.ErrUnavailable))
	}
	return d.Transport.Do(ctx, ops, res)
}

// Lock.Err "wraps ErrNotHeld (as ErrExpired, ErrReleased, or an
// extension's error) or ErrClosed": one kind. A lock lost because its
// auto-extensions found too few masters (ErrQuorumUnreachable, retried
// and failed again) is not held: its Err must match ErrNotHeld and no other
// sentinel. A second one breaks callers that branch with errors.Is, and an
// Extend on the lost lock, whose error carries the cause, would match
// ErrQuorumUnreachable, which for Extend means "the lock stays as it was:
// call Extend again".
func TestLostLockErrWrapsOneSentinel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ts := memoryMasters(3)
		var down atomic.Bool
		for i := range 2 {
			ts[i] = &downForExtends{Transport: ts[i], on: &down}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "held", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		until := l.Until()
		down.Store(true)
		<-l.Done()
		lost := time.Now()
		cause := l.Err()
		if !lost.Before(until) {
			t.Fatalf("the lock ran out at Until (%v), not on its failed auto-extensions: %v", until, cause)
		}
		if got := sentinelsOf(cause); len(got) != 1 || got[0] != "ErrNotHeld" {
			t.Errorf("Err of a lock lost on failed auto-extensions: %v\nmatches %v; want ErrNotHeld alone", cause, got)
		}
		err = l.Extend(ctx)
		if got := sentinelsOf(err); len(got) != 1 || got[0] != "ErrNotHeld" {
			t.Errorf("Extend of that lock: %v\nmatches %v; want ErrNotHeld alone (ErrQuorumUnreachable tells Extend's caller the lock is still held)", err, got)
		}
		down.Store(false)
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, api.ErrNotHeld) {
			t.Errorf("Unlock: %v", err)
		}
	})
}

// A call that Close cuts fails with ErrClosed, and with nothing else that
// errors.Is can find: a Lock that was retrying on a taken key must not
// also match ErrNotAcquired (its last attempt's answer), or a caller that
// retries on "taken" retries on a closed engine, and `redlock` reports a
// closed engine as a taken lock. The last attempt stays in the message and
// in Last. An Extend of a lock the Close ended is ErrClosed alone too, not
// ErrNotHeld beside it (TestCloseEndsUnwatchedLocks asks for ErrClosed).
func TestClosedCallsWrapOneSentinel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := engine.NewMemory(3, api.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		held, err := e.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.Lock(ctx, "k") // retries: the key is taken
			done <- err
		}()
		time.Sleep(100 * time.Millisecond) // bubble time: a few refused attempts
		synctest.Wait()
		e.Close()
		err = <-done
		if got := sentinelsOf(err); len(got) != 1 || got[0] != "ErrClosed" {
			t.Errorf("Lock cut by Close: %v\nmatches %v; want ErrClosed alone", err, got)
		}
		var ae *api.Error
		if !errors.As(err, &ae) || !errors.Is(ae.Last, api.ErrNotAcquired) {
			t.Errorf("Lock cut by Close: %v: Last should keep the last attempt's answer (not acquired)", err)
		}
		err = held.Extend(ctx)
		if got := sentinelsOf(err); len(got) != 1 || got[0] != "ErrClosed" {
			t.Errorf("Extend of a lock Close ended: %v\nmatches %v; want ErrClosed alone", err, got)
		}
	})
}

// Unlock "returns nil when a majority released it, ErrNotHeld when it had
// already expired or been released". A lock whose validity ran out before
// Unlock, while its keys are still on the masters (Until comes a drift
// allowance before the keys' TTL), was released and reported nil: a holder
// that checks Unlock's result to learn whether its work ran under the lock
// learned that it did. Unlock must still delete the keys, and say the lock
// had expired (ErrExpired, an ErrNotHeld).
func TestUnlockAfterTheLockEndedSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		masters, ts := memoryMasters(3)
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "overran")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(l.Until()) + time.Millisecond) // past Until, before the keys' TTL
		for i, m := range masters {
			if m.Len() != 1 {
				t.Fatalf("master %d holds %d keys a moment past Until: the test meant keys still there", i, m.Len())
			}
		}
		err = l.Unlock(ctx)
		if !errors.Is(err, api.ErrExpired) {
			t.Errorf("Unlock of a lock whose validity had run out: %v, want ErrExpired (ErrNotHeld)", err)
		}
		for i, m := range masters {
			if n := m.Len(); n != 0 {
				t.Errorf("master %d holds %d keys after Unlock: an expired lock's keys must be released all the same", i, n)
			}
		}
	})
}
