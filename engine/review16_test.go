package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
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

// failRelease fails the first release it is sent, without applying it, as a
// master that timed out on it would; everything else goes through.
type failRelease struct {
	transport.Transport
	failed atomic.Bool
}

func (m *failRelease) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if slices.ContainsFunc(ops, func(op transport.Op) bool { return op.Kind == transport.Release }) && m.failed.CompareAndSwap(false, true) {
		return transport.Fail(res, fmt.Errorf("master 1: injected: %w", context.DeadlineExceeded))
	}
	return m.Transport.Do(ctx, ops, res)
}

// Close "lets the releases that this sends reach the masters", and makes a
// last attempt at every background cleanup (cleanLast). A Lock waiting for
// its next attempt whose last attempt's release had failed on a master was
// left out of both: it was finished with ErrClosed while the engine was
// closing, so it never joined the background cleanups, and its next attempt,
// which would have sent the release again ahead of its SET, never came. Its
// key stayed on that master for its TTL after Close, against "no key left on
// a master after a failed attempt".
func TestCloseReleasesAWaitingCallsLeftovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts := memoryMasters(3)
		for _, m := range ms[1:] {
			res := make([]transport.Result, 1)
			_ = m.Transport().Do(context.Background(), []transport.Op{{Kind: transport.Acquire, Key: "k", Value: "other", TTL: time.Hour}}, res)
			if !res[0].OK {
				t.Fatalf("setting up the other holder: %+v", res[0])
			}
		}
		fr := &failRelease{Transport: ts[0]}
		ts[0] = fr
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			l, err := e.Lock(context.Background(), "k", api.WithTTL(time.Hour),
				api.WithRetry(api.Retry{InitialInterval: time.Minute, MaxInterval: time.Minute, Multiplier: 1}))
			if err == nil {
				_ = l.Unlock(context.Background())
			}
			done <- err
		}()
		synctest.Wait() // the first attempt failed; the next is a minute away
		if !fr.failed.Load() {
			t.Fatal("the failed attempt's release never reached master 1")
		}
		if _, ok := ms[0].Get("k"); !ok {
			t.Fatal("master 1 does not hold the failed attempt's key: the test sets nothing up")
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, api.ErrClosed) {
			t.Errorf("Lock: %v; want ErrClosed", err)
		}
		if v, ok := ms[0].Get("k"); ok {
			t.Errorf("master 1 still holds the failed attempt's key (value %q, TTL 1h) after Close", v)
		}
	})
}

// A master restarted while it was slow must not vote: the slow path (a
// timed-out acquire is an uncounted retry, its SET applied late) must not
// let a grant from the restarted process count. Engine A holds the key on
// all three masters; masters 1 and 2 stall (B's SETs held in the
// transport) and restart empty during the stall; when they resume they
// apply the held SETs and grant them. Two grants are a majority: only the
// restart quarantine keeps B out while A's lock is valid. In "within the
// master timeout" the held batch returns its grants in time, across the
// restart (the node's epoch check after Do); in "after timeouts" B's
// attempts time out as slow first and are retried, and the later batches
// reach the restarted processes (the read of their run id).
func TestMasterRestartedWhileSlowDoesNotVote(t *testing.T) {
	for _, tc := range []struct {
		name           string
		restart, until time.Duration // since B's TryLock began
	}{
		{"within the master timeout", 50 * time.Millisecond, 80 * time.Millisecond},
		{"after timeouts", 250 * time.Millisecond, 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, inner := memoryMasters(3)
				// Up for longer than the quarantine period: B's first
				// read of each master trusts it.
				time.Sleep(2 * time.Minute)
				a, err := engine.NewWithTransports(inner, api.WithoutRestartQuarantine())
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				fs := make([]*faulty.Transport, len(inner))
				ts := make([]transport.Transport, len(inner))
				for i, m := range ms {
					fs[i] = faulty.Wrap(m.Transport(), faulty.Config{})
					ts[i] = fs[i]
				}
				b, err := engine.NewWithTransports(ts, api.WithRestartQuarantine(time.Minute), api.WithMasterTimeout(100*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				synctest.Wait() // B has read every master's run id
				ctx := context.Background()
				held, err := a.TryLock(ctx, "slow-restart", api.WithTTL(30*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fs[:2] {
					f.Pause()
				}
				got := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					defer cancel()
					l, err := b.TryLock(ctx, "slow-restart", api.WithTTL(30*time.Second))
					if err == nil {
						err = nil
						_ = l.Unlock(context.Background())
					} else {
						err = fmt.Errorf("refused: %w", err)
					}
					got <- err
				}()
				time.Sleep(tc.restart)
				ms[0].Restart()
				ms[1].Restart()
				time.Sleep(tc.until - tc.restart)
				for _, f := range fs[:2] {
					f.Resume()
				}
				err = <-got
				if err == nil {
					t.Fatalf("B got the lock while A held it (A valid until %v, now %v): two masters restarted while slow voted", held.Until(), time.Now())
				}
				if !time.Now().Before(held.Until()) {
					t.Fatalf("A's lock expired before B gave up (%v): the test checks nothing", err)
				}
				t.Log(err)
			})
		})
	}
}
