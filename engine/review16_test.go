package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// api.Locker.TryLock: an attempt spoiled by overload is tried again "for at
// most about a TTL of overload at a stretch, after which it fails with
// ErrQuorumUnreachable". review15 bounded the slow-master and too-late
// retries so (Call.slowSince), but not the other kind of overload: an
// acquire that the node dropped from its queue (errStale) or the transport
// did not send (transport.ErrNotSent, which the node turns into errStale).
// Every master answering "not sent" for good (a client starved for good, or
// a transport that answers ErrNotSent at once) kept a TryLock with no
// deadline retrying for as long as the process ran.
func TestNotSentRetriesEndAfterATTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(e *engine.Engine, ctx context.Context) (api.Lock, error)
	}{
		{"TryLock", func(e *engine.Engine, ctx context.Context) (api.Lock, error) {
			return e.TryLock(ctx, "ns-ttl", api.WithTTL(time.Second))
		}},
		{"Lock, one attempt", func(e *engine.Engine, ctx context.Context) (api.Lock, error) {
			return e.Lock(ctx, "ns-ttl", api.WithTTL(time.Second), api.WithMaxAttempts(1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, ts := memoryMasters(3)
				for i := range ts {
					ts[i] = &notSentMaster{Transport: ts[i]}
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				// The deadline only stops the old code's loop: the
				// bound under test is the TTL (1s).
				const limit = time.Minute
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				defer cancel()
				start := time.Now()
				l, err := tc.call(e, ctx)
				took := time.Since(start)
				if err == nil {
					_ = l.Unlock(context.Background())
					t.Fatal("got a lock that no master granted")
				}
				if !errors.Is(err, api.ErrQuorumUnreachable) || took > 3*time.Second {
					t.Errorf("every acquire not sent, TTL 1s: %v after %v; want ErrQuorumUnreachable within about the TTL (api.Locker.TryLock)", err, took)
				}
				synctest.Wait()
				for i, m := range ms {
					if m.Len() != 0 {
						t.Errorf("master %d holds %d keys", i+1, m.Len())
					}
				}
			})
		})
	}
}
