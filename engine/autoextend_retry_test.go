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

// lateExtends is a healthy master whose answers to the first extensions
// come too late for the master timeout, as they do on a client starved of
// CPU that reads them late (issue 13, the residual overload failure): it
// holds back batches with an extension until the batch's deadline while
// late is above zero, and counts them down.
type lateExtends struct {
	transport.Transport
	late *atomic.Int32
}

func (s *lateExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if hasExtend(ops) && s.late.Add(-1) >= 0 {
		<-ctx.Done()
		return transport.Fail(res, ctx.Err())
	}
	return s.Transport.Do(ctx, ops, res)
}

// An auto-extension that fails because the masters' answers came too late
// (ErrQuorumUnreachable) is tried again while the lock is still valid,
// rather than ending a lock that has half its validity left: under
// overload a held lock must not be lost while it is valid. The first
// extension times out on three of five masters; the lock must still be held
// past the validity it had, extended by a later attempt.
func TestAutoExtensionRetriedWhileValid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			ttl     = time.Second
			timeout = 50 * time.Millisecond
		)
		_, ts := memoryMasters(5)
		var late atomic.Int32
		for i := range 3 {
			ts[i] = &lateExtends{Transport: ts[i], late: &late}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithMasterTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "held", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		first := l.Until()
		late.Store(3) // the first extension's batch on each of the three
		time.Sleep(time.Until(first) + ttl/10)
		select {
		case <-l.Done():
			t.Fatalf("the lock was lost with %v of its validity left when one auto-extension timed out: %v", ttl/2, l.Err())
		default:
		}
		if !l.Until().After(first) {
			t.Fatalf("the lock is held past %v but its Until did not move", first)
		}
		if n := late.Load(); n > 0 {
			t.Fatalf("%d of the late extensions never came: the test did not test the timeout", n)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
