package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// silentExtends is a master that never answers an extension: it holds the
// batch until the batch's own deadline (the master timeout).
type silentExtends struct{ transport.Transport }

func (s silentExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if slices.ContainsFunc(ops, func(op transport.Op) bool { return op.Kind == transport.Extend }) {
		<-ctx.Done()
		return transport.Fail(res, ctx.Err())
	}
	return s.Transport.Do(ctx, ops, res)
}

// An auto-extension is given up at Until even when the masters' silence
// would hold it longer (a master timeout of a minute here): past Until the
// lock may be someone else's. Its context is the lock (autoCtx), which
// ends when the timer finds the validity passed; the handle is free again
// at once and Err says the lock expired.
func TestAutoExtensionEndsAtUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		ts := make([]transport.Transport, 3)
		for i := range ts {
			ts[i] = silentExtends{memory.New().Transport()}
		}
		e, err := NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithMasterTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		h, err := e.TryLock(context.Background(), "held", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		l := h.(*lock)
		until := l.Until()
		time.Sleep(time.Until(until) + time.Millisecond)
		synctest.Wait()
		if !isClosed(l.Done()) {
			t.Fatalf("Done still open past Until; Err = %v", l.Err())
		}
		if err := l.Err(); !errors.Is(err, api.ErrExpired) {
			t.Fatalf("Err = %v, want ErrExpired", err)
		}
		if l.extended != 1 {
			t.Fatalf("%d extensions were tried, want the one that got no answer", l.extended)
		}
		if !l.mu.TryLock() {
			t.Fatalf("the auto-extension still holds the handle past Until: it would go on for the master timeout")
		}
		l.mu.Unlock()
	})
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
