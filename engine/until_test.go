package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// A grant's deadline is where its keys could first expire: every granting
// master applied the SET at or after the batch went out, so its key lives
// until at least send + TTL, less the drift allowance. The answers' round
// trip is used up validity, but it must be charged once: a lock whose
// answers took 60% of its TTL still has 40% (less drift) left when Lock
// returns, and its Until is send + TTL - drift. The same holds for an
// extension. (Under synctest the clock is exact: the send is at the call.)
func TestGrantUntilCountsFromSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			ttl     = time.Second
			service = 600 * time.Millisecond
		)
		drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
		_, ts := memoryMasters(5)
		var delay atomic.Int64
		delay.Store(int64(service))
		for i := range ts {
			ts[i] = busy(ts[i], &delay)
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(),
			api.WithMasterTimeout(800*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()

		t0 := time.Now()
		l, err := e.TryLock(ctx, "slow-answers", api.WithTTL(ttl))
		if err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		if took := time.Since(t0); took != service {
			t.Fatalf("TryLock took %v, want the masters' %v", took, service)
		}
		if want := t0.Add(ttl - drift); !l.Until().Equal(want) {
			t.Fatalf("Until is %v after the send, want %v (TTL less drift): the round trip was charged twice",
				l.Until().Sub(t0), want.Sub(t0))
		}
		select {
		case <-l.Done():
			t.Fatal("Done closed at once: the lock was handed out already expired")
		default:
		}

		// A faster extension, so that it ends within the lock's validity.
		delay.Store(int64(service / 2))
		t1 := time.Now()
		if err := l.Extend(ctx); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if want := t1.Add(ttl - drift); !l.Until().Equal(want) {
			t.Fatalf("after Extend, Until is %v after its send, want %v", l.Until().Sub(t1), want.Sub(t1))
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
}
