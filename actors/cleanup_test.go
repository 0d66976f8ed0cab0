package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"go.uber.org/goleak"
)

var errLost = errors.New("test: reply lost (the op was applied)")

// lossy wraps a memory master with the two faults that leave a call's own
// key behind: an acquire whose SET lands but whose reply is lost, and a
// batch that carries a release failing fast, unsent, the way
// transport/redis fails a batch with ErrUnavailable while it reconnects.
type lossy struct {
	transport.Transport
	mu          sync.Mutex
	loseAcquire int  // batches left whose acquires are applied but reported failed
	relDown     bool // every batch with a release fails unsent
	relDownN    int  // the next relDownN batches with a release fail unsent
	applied     chan struct{}
}

func newLossy(m *memory.Master) *lossy {
	return &lossy{Transport: m.Transport(), applied: make(chan struct{}, 1)}
}

func (l *lossy) set(f func(*lossy)) {
	l.mu.Lock()
	f(l)
	l.mu.Unlock()
}

func (l *lossy) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	hasRel, hasAcq := false, false
	for _, op := range ops {
		hasRel = hasRel || op.Kind == transport.Release
		hasAcq = hasAcq || op.Kind == transport.Acquire || op.Kind == transport.AcquireFenced
	}
	l.mu.Lock()
	if hasRel && (l.relDown || l.relDownN > 0) {
		if !l.relDown {
			l.relDownN--
		}
		l.mu.Unlock()
		return transport.Fail(res, fmt.Errorf("%w: reconnecting", transport.ErrUnavailable))
	}
	lose := hasAcq && l.loseAcquire > 0
	if lose {
		l.loseAcquire--
	}
	l.mu.Unlock()
	err := l.Transport.Do(ctx, ops, res)
	if lose {
		for i, op := range ops {
			if op.Kind == transport.Acquire || op.Kind == transport.AcquireFenced {
				res[i] = transport.Result{Err: errLost}
			}
		}
	}
	select {
	case l.applied <- struct{}{}:
	default:
	}
	return err
}

func lossyCluster(t *testing.T, n int, timeout time.Duration) (*Cluster, []*memory.Master, []*lossy) {
	t.Helper()
	ms := make([]*memory.Master, n)
	ls := make([]*lossy, n)
	ts := make([]transport.Transport, n)
	for i := range ms {
		ms[i] = memory.New()
		ls[i] = newLossy(ms[i])
		ts[i] = ls[i]
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
	}
	c, err := Start(Config{Transports: ts, Names: names, MasterTimeout: timeout, MaxBatch: 64, MaxInFlight: 1, Coordinators: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c, ms, ls
}

func lockCall(key, value string, attempts int) *Call {
	call := NewCall(Acquire, "lock", key, value, time.Minute, time.Millisecond)
	call.Retry = api.DefaultOptions().Retry
	call.Retry.MaxAttempts = attempts
	call.Queue = true
	return call
}

// A Lock call's first attempt leaves its SET on every master (the replies
// were lost) and its cleanup release is never sent; the second attempt,
// with the same value, must not be refused by the call's own key and
// report the free lock as taken.
func TestOwnLeftoverIsNotTaken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   []string
		fenced bool
	}{{name: "one key"}, {name: "multi-key", keys: []string{"k", "k2"}}, {name: "fenced", fenced: true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, ms, ls := lossyCluster(t, 3, 50*time.Millisecond)
				defer c.Close()
				for _, l := range ls {
					l.set(func(l *lossy) { l.loseAcquire, l.relDownN = 1, 1 })
				}
				call := lockCall("k", "v", 2)
				call.Keys, call.Fenced = tc.keys, tc.fenced
				if err := c.Submit(call); err != nil {
					t.Fatal(err)
				}
				<-call.Done()
				if call.Err != nil {
					t.Fatalf("lock with its own leftovers on every master, the lock otherwise free: %v; want it held", call.Err)
				}
				// The call is decided by a majority; the last master's
				// release and SET may still be on their way. Let them land.
				synctest.Wait()
				for i, m := range ms {
					for _, k := range append([]string{"k"}, tc.keys...) {
						if v, ok := m.Get(k); !ok || v != "v" {
							t.Fatalf("master %d holds %s=%q (%v); want the call's value", i, k, v, ok)
						}
					}
				}
			})
		})
	}
}

// While the cleanup releases keep failing, a refusal may come from the
// call's own key: the call must not say "taken".
func TestOwnLeftoverRefusalIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, ls := lossyCluster(t, 3, 50*time.Millisecond)
		defer c.Close()
		for _, l := range ls {
			l.set(func(l *lossy) { l.loseAcquire, l.relDown = 1, true })
		}
		call := lockCall("k", "v", 3)
		if err := c.Submit(call); err != nil {
			t.Fatal(err)
		}
		<-call.Done()
		if errors.Is(call.Err, api.ErrNotAcquired) || !errors.Is(call.Err, api.ErrQuorumUnreachable) {
			t.Fatalf("lock refused only by its own key, its releases failing: %v; want ErrQuorumUnreachable, never ErrNotAcquired", call.Err)
		}
	})
}

// waitEmpty waits, on the masters' own events, until no master holds a key;
// it fails if that takes until limit (synctest time) has passed.
func waitEmpty(t *testing.T, ms []*memory.Master, ls []*lossy, limit time.Duration) {
	t.Helper()
	giveUp := time.After(limit)
	for {
		left := 0
		for _, m := range ms {
			left += m.Len()
		}
		if left == 0 {
			return
		}
		select {
		case <-ls[0].applied:
		case <-ls[1].applied:
		case <-ls[2].applied:
		case <-giveUp:
			t.Fatalf("%d keys still on the masters %v after the transport healed", left, limit)
		}
	}
}

// A call that ends without the lock while its cleanup releases fail must
// keep releasing once the transport heals, well before the keys would
// expire on their own, and still return its error at once.
func TestFailedCallCleansUpWhenTransportHeals(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		run  func(*Cluster, *Call)
	}{
		{"trylock", func(c *Cluster, call *Call) { call.Retry.MaxAttempts = 1 }},
		{"cancelled", func(c *Cluster, call *Call) { c.Cancel(call, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, ms, ls := lossyCluster(t, 3, timeout)
				defer c.Close()
				for _, l := range ls {
					l.set(func(l *lossy) { l.loseAcquire, l.relDown = 1, true })
				}
				call := lockCall("k", "v", 0)
				began := time.Now()
				if tc.name == "trylock" {
					tc.run(c, call)
				}
				if err := c.Submit(call); err != nil {
					t.Fatal(err)
				}
				if tc.name == "cancelled" {
					// The first attempt has failed and its releases with it;
					// give up while the call waits to retry.
					synctest.Wait()
					tc.run(c, call)
				}
				<-call.Done()
				if call.Err == nil {
					t.Fatal("lock with every reply lost: held")
				}
				if took := time.Since(began); took > timeout {
					t.Fatalf("the failed call returned after %v; want at once", took)
				}
				for _, l := range ls {
					l.set(func(l *lossy) { l.relDown = false })
				}
				waitEmpty(t, ms, ls, call.TTL/2)
			})
		})
	}
}

// Close sends the releases still pending once more and leaves no timer or
// goroutine behind.
func TestClosePendingCleanup(t *testing.T) {
	c, ms, ls := lossyCluster(t, 3, 2*time.Second)
	for _, l := range ls {
		l.set(func(l *lossy) { l.loseAcquire, l.relDown = 1, true })
	}
	call := lockCall("k", "v", 1)
	if err := c.Submit(call); err != nil {
		t.Fatal(err)
	}
	<-call.Done()
	if call.Err == nil {
		t.Fatal("lock with every reply lost: held")
	}
	for _, l := range ls {
		l.set(func(l *lossy) { l.relDown = false })
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if v, ok := m.Get("k"); ok {
			t.Fatalf("master %d still holds k=%q after Close", i, v)
		}
	}
	goleak.VerifyNone(t)
}

// downThenHung fails its first batch at once, as a dead master does, and
// holds every later one until its context ends, as a master that stopped
// answering does.
type downThenHung struct {
	transport.Transport
	calls atomic.Int32
}

func (d *downThenHung) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if d.calls.Add(1) == 1 {
		return transport.Fail(res, fmt.Errorf("%w: connection refused", transport.ErrUnavailable))
	}
	<-ctx.Done()
	return transport.Fail(res, ctx.Err())
}

// A Lock whose context ends while an attempt is out, before any master has
// answered it, reports the answers of the last attempt that had any: those
// are what its Last error describes ("fewer than 3 could vote: failed,
// failed, failed"), where the cut attempt's are all pending and explain
// nothing (cmd/redlock's TestRunUnreachable saw exactly that on a loaded
// machine when --wait ran out).
func TestCancelledMidAttemptReportsLastAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := make([]transport.Transport, 3)
		for i := range ts {
			ts[i] = &downThenHung{Transport: memory.New().Transport()}
		}
		c := start(t, ts, 10*time.Second, 1)
		call := lockCall("k", "v", 0)
		if err := c.Submit(call); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // fake time: the first attempt failed, the second is out
		synctest.Wait()
		c.Cancel(call, context.DeadlineExceeded)
		<-call.Done()
		var ae *api.Error
		if !errors.As(call.Err, &ae) || !errors.Is(call.Err, context.DeadlineExceeded) || !errors.Is(call.Err, api.ErrQuorumUnreachable) {
			t.Fatalf("got %v; want DeadlineExceeded after ErrQuorumUnreachable", call.Err)
		}
		if ae.Attempts < 2 {
			t.Fatalf("%d attempts, want the second one cut", ae.Attempts)
		}
		// The first attempt was decided once a majority was out of reach:
		// at least two of three failed (the third may still be pending).
		failed := 0
		for _, m := range ae.Masters {
			if m.Answer == api.Failed && errors.Is(m.Err, transport.ErrUnavailable) {
				failed++
			}
		}
		if failed < 2 {
			t.Fatalf("%d masters failed in the answers reported, want the 2 or more that made the quorum unreachable: %v", failed, call.Err)
		}
	})
}
