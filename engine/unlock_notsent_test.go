package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lateRelease is a healthy master whose client reaches it too late for the
// first batch that carries a release: the transport reports
// transport.ErrNotSent (nothing applied), as the Redis transport does for a
// batch whose deadline passed before it was sent (a CPU-starved client).
type lateRelease struct {
	transport.Transport
	missed atomic.Bool
}

func (m *lateRelease) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.Release && m.missed.CompareAndSwap(false, true) {
			return transport.Fail(res, fmt.Errorf("master: %w: %w", transport.ErrNotSent, context.DeadlineExceeded))
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

// No key left on a master after an Unlock, when the client was only late:
// a release the transport reports not sent (transport.ErrNotSent) reached
// no master, and sending it again is safe (it deletes only this lock's
// value), so Unlock must not leave the key there until its TTL, nor report
// healthy masters as unreachable. With one master of three late, Unlock
// succeeded on the other two and left the key on it; with two, it failed
// with ErrQuorumUnreachable and left both.
func TestUnlockNotSentReleaseIsResent(t *testing.T) {
	for _, late := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d of 3 masters late", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, ts := memoryMasters(3)
				for i := range late {
					ts[i] = &lateRelease{Transport: ts[i]}
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				ctx := context.Background()
				l, err := e.TryLock(ctx, "u", api.WithTTL(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("Unlock with %d healthy masters' releases not sent the first time: %v", late, err)
				}
				for i, m := range ms {
					if v, ok := m.Get("u"); ok {
						t.Errorf("master %d still holds the key (value %q) after Unlock returned (TTL 1m)", i+1, v)
					}
				}
			})
		})
	}
}
