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

// Close while locks are auto-extended: one lock's extension is out (the
// masters sit on it, for up to a minute), another's waits for the only
// slot. Close returns, both locks are lost with ErrClosed (not expired:
// their validity has not run out), and nothing of the engine is left
// running: synctest.Test fails on a goroutine of the bubble still blocked
// when the test returns (the extension's timer goroutine waiting for its
// call, or for a slot).
func TestCloseWhileAutoExtensionsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		_, ts := memoryMasters(3)
		for i := range ts {
			ts[i] = unanswered{ts[i], func(op transport.Op) bool { return op.Kind == transport.Extend }}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl),
			api.WithMasterTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		engine.SetAutoSlots(e, 1)
		ctx := context.Background()
		out, err := e.TryLock(ctx, "out", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		parked, err := e.TryLock(ctx, "parked", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl * 6 / 10) // both due: "out"'s extension has the slot, "parked"'s waits
		synctest.Wait()
		// Channels taken before Close, as a holder watching its lock does:
		// Close itself must close them (a later Done() call settles the
		// clock, and would close them anyway).
		dones := []<-chan struct{}{out.Done(), parked.Done()}
		closed := time.Now()
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for i, l := range []api.Lock{out, parked} {
			select {
			case <-dones[i]:
			default:
				t.Fatalf("%s: Done open after Close", l.Key())
			}
			if err := l.Err(); !errors.Is(err, api.ErrClosed) {
				t.Errorf("%s: Err after Close = %v, want ErrClosed", l.Key(), err)
			}
			if !l.Until().After(closed) {
				t.Errorf("%s: Until %v is not after Close: the test meant a lock still valid", l.Key(), l.Until().Sub(closed))
			}
		}
		// ErrClosed alone, as the lock's Err and TestCloseEndsUnwatchedLocks
		// say (it matched ErrNotHeld too, through the lost cause, before an
		// error wrapped one sentinel: TestClosedCallsWrapOneSentinel).
		if err := parked.Extend(ctx); !errors.Is(err, api.ErrClosed) || errors.Is(err, api.ErrNotHeld) {
			t.Errorf("Extend after Close = %v, want ErrClosed (alone)", err)
		}
	})
}
