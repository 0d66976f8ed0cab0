package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lateMaster is a healthy master whose client reaches it too late for the
// first batch that carries an acquire: the transport reports
// transport.ErrNotSent, as the Redis transport does when a batch's deadline
// passed before it was sent (a CPU-starved client).
type lateMaster struct {
	transport.Transport
	missed atomic.Bool
}

func (m *lateMaster) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.Acquire && m.missed.CompareAndSwap(false, true) {
			return transport.Fail(res, fmt.Errorf("master: %w: %w", transport.ErrNotSent, context.DeadlineExceeded))
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

// Admission control: a batch the client did not send in time is the
// client's overload, not the masters' failure. Three of five healthy masters
// get the TryLock's SET too late to send it; the TryLock must get its lock
// (the attempt retried, as for an acquire dropped from a node's queue), not
// fail with ErrQuorumUnreachable.
func TestNotSentIsOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ts := memoryMasters(5)
		for i := range 3 {
			ts[i] = &lateMaster{Transport: ts[i]}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "late")
		if err != nil {
			t.Fatalf("TryLock on healthy masters whose client sent the SET too late to three of them: %v (unreachable: %v); want the lock",
				err, errors.Is(err, api.ErrQuorumUnreachable))
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
