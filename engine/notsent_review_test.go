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

// notSentMaster answers every acquire with transport.ErrNotSent. With
// applied set it lies: it applies the SET first, as a transport that
// mislabelled a batch whose bytes had gone out would (a partial write, a
// resend after a redirect). The engine cannot tell; it must clean up on such
// a master all the same.
type notSentMaster struct {
	transport.Transport
	applied bool
	refused atomic.Int64 // acquires answered ErrNotSent
}

func (m *notSentMaster) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	acq := false
	for _, op := range ops {
		acq = acq || op.Kind == transport.Acquire
	}
	if !acq {
		return m.Transport.Do(ctx, ops, res)
	}
	if m.applied {
		_ = m.Transport.Do(ctx, ops, res)
	}
	// Only the acquires are not sent: a release ahead of them in the
	// batch (the retry's cleanup of the attempt before) is answered truly.
	var err error
	for i, op := range ops {
		if op.Kind != transport.Acquire {
			if !m.applied {
				one := res[i : i+1]
				_ = m.Transport.Do(ctx, ops[i:i+1], one)
			}
			continue
		}
		m.refused.Add(1)
		err = fmt.Errorf("master: %w: %w", transport.ErrNotSent, context.DeadlineExceeded)
		res[i] = transport.Result{Err: err}
	}
	return err
}

// No key left on a master after a failed attempt, whatever the master said
// about the SET: an acquire that came back "not sent" is an uncounted retry
// (actors/notsent.go), but its cleanup must still go to that master, since
// "not sent" is the transport's word, not something the engine saw. Two of
// three masters apply the SET and say ErrNotSent, every time; the TryLock
// retries (uncounted) until its context ends, and within the TTL (a
// minute, so nothing expires by itself) no key may be left on any master.
// A coordinator that spared the masters whose acquire was errStale from
// the release (they "saw nothing") leaves the key on both.
func TestNotSentAcquireIsStillCleanedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts := memoryMasters(3)
		liars := []*notSentMaster{{Transport: ts[0], applied: true}, {Transport: ts[1], applied: true}}
		ts[0], ts[1] = liars[0], liars[1]
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l, err := e.TryLock(ctx, "ns", api.WithTTL(time.Minute))
		if err == nil {
			_ = l.Unlock(context.Background())
			t.Fatal("TryLock got a lock from one truthful master of three")
		}
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrQuorumUnreachable) {
			t.Errorf("TryLock = %v; want its context's deadline (the not-sent attempts are uncounted retries), not unreachable masters", err)
		}
		if liars[0].refused.Load() < 2 {
			t.Errorf("%d acquires reached the lying master; want the attempt retried", liars[0].refused.Load())
		}
		// The background cleanup backs off from the master timeout to a
		// second; a few seconds is far inside the minute's TTL.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for i, m := range ms {
			if v, ok := m.Get("ns"); ok {
				t.Errorf("master %d still holds the key (value %q) 5s after the failed TryLock (TTL 1m)", i+1, v)
			}
		}
	})
}

// Uncounted retries end with the caller's context. Every acquire on every
// master comes back "not sent" (nothing applied): each attempt is retried
// without counting against the budget, so only the context can end the
// call; it must, at its deadline, with an error that wraps the deadline and
// not "unreachable" (ARCHITECTURE: "would keep a TryLock retrying until its
// context ends"). With a budget of one attempt, Lock behaves the same.
func TestNotSentRetriesEndWithContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(e *engine.Engine, ctx context.Context) (api.Lock, error)
	}{
		{"TryLock", func(e *engine.Engine, ctx context.Context) (api.Lock, error) { return e.TryLock(ctx, "ns") }},
		{"Lock, one attempt", func(e *engine.Engine, ctx context.Context) (api.Lock, error) {
			return e.Lock(ctx, "ns", api.WithMaxAttempts(1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, ts := memoryMasters(3)
				var liars []*notSentMaster
				for i := range ts {
					liars = append(liars, &notSentMaster{Transport: ts[i]})
					ts[i] = liars[i]
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				const limit = 300 * time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				defer cancel()
				start := time.Now()
				l, err := tc.call(e, ctx)
				took := time.Since(start)
				if err == nil {
					_ = l.Unlock(context.Background())
					t.Fatal("got a lock that no master granted")
				}
				if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrQuorumUnreachable) {
					t.Errorf("%v; want the context's deadline, not unreachable masters", err)
				}
				if took != limit {
					t.Errorf("returned after %v; want at the context's deadline, %v", took, limit)
				}
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Attempts < 2 {
					t.Errorf("%v: want an *api.Error counting more than one attempt (uncounted retries)", err)
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
