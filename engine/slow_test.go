package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
	"github.com/quorumlock/redlock/transport/memory"
)

// slowMasters is five in-memory masters behind fault wrappers, so that a
// test can pause some: a paused master holds every batch (the engine's
// timed-out ones included) and applies them in order when it resumes, as a
// starved redis-server does when it gets the CPU back.
func slowMasters(t *testing.T, opts ...api.Option) (*engine.Engine, []*faulty.Transport, []*memory.Master) {
	t.Helper()
	ms, inner := memoryMasters(5)
	fs := make([]*faulty.Transport, len(inner))
	ts := make([]transport.Transport, len(inner))
	for i := range inner {
		fs[i] = faulty.Wrap(inner[i], faulty.Config{})
		ts[i] = fs[i]
	}
	opts = append([]api.Option{api.WithoutRestartQuarantine(), api.WithMasterTimeout(100 * time.Millisecond)}, opts...)
	e, err := engine.NewWithTransports(ts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e, fs, ms
}

// Admission control: a master that is alive but slow (it answers, only
// after the master timeout) is overload, and overload is latency. Three of
// five healthy masters stall for 300ms, three master timeouts, and then
// answer everything they were sent: the TryLock issued during the stall
// must get its lock once they answer, not fail with ErrQuorumUnreachable.
func TestSlowMastersAreLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, ms := slowMasters(t)
		defer e.Close()
		ctx := context.Background()
		for _, f := range fs[:3] {
			f.Pause()
		}
		type result struct {
			l   api.Lock
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := e.TryLock(ctx, "slow")
			got <- result{l, err}
		}()
		time.Sleep(300 * time.Millisecond)
		for _, f := range fs[:3] {
			f.Resume()
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("TryLock while three healthy masters stalled for three master timeouts: %v (unreachable: %v); want the lock once they answer",
				r.err, errors.Is(r.err, api.ErrQuorumUnreachable))
		}
		if !r.l.Until().After(time.Now()) {
			t.Fatalf("lock granted already expired (until %v)", r.l.Until())
		}
		if err := r.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i, m := range ms {
			if m.Len() != 0 {
				t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
			}
		}
	})
}

// The same for Unlock: three masters stall for 300ms while the lock is
// released. They do delete the key when they answer; the Unlock must wait
// for that (latency) instead of reporting "release not confirmed by a
// majority" as ErrQuorumUnreachable.
func TestSlowMastersUnlockIsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, ms := slowMasters(t)
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "slow-unlock")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs[:3] {
			f.Pause()
		}
		done := make(chan error, 1)
		go func() { done <- l.Unlock(ctx) }()
		time.Sleep(300 * time.Millisecond)
		for _, f := range fs[:3] {
			f.Resume()
		}
		if err := <-done; err != nil {
			t.Fatalf("Unlock while three healthy masters stalled for three master timeouts: %v (unreachable: %v); want nil once they answer",
				err, errors.Is(err, api.ErrQuorumUnreachable))
		}
		synctest.Wait()
		for i, m := range ms {
			if m.Len() != 0 {
				t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
			}
		}
	})
}

// lateGrant answers the first acquire it is sent only after *late, past the
// batch's deadline, as the Redis transport does for a reply that reached
// this host by the deadline but was read late (a starved client): the grant
// is real, and only its validity is used up.
type lateGrant struct {
	transport.Transport
	late  time.Duration
	fired atomic.Bool
}

func (m *lateGrant) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.Acquire && m.fired.CompareAndSwap(false, true) {
			err := m.Transport.Do(context.Background(), ops, res)
			time.Sleep(m.late)
			return err
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

// A majority that granted too late for any validity to be left answered:
// its masters are alive, so the attempt is overload (retried, latency), not
// unreachable masters. Three masters' grants of the first attempt come
// 300ms after the send, with a TTL of 250ms.
func TestTooLateGrantIsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts := memoryMasters(5)
		for i := range 3 {
			ts[i] = &lateGrant{Transport: ts[i], late: 300 * time.Millisecond}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "too-late", api.WithTTL(250*time.Millisecond))
		if err != nil {
			t.Fatalf("TryLock whose first majority granted too late on healthy masters: %v (unreachable: %v); want the lock from a retry",
				err, errors.Is(err, api.ErrQuorumUnreachable))
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i, m := range ms {
			if m.Len() != 0 {
				t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
			}
		}
	})
}

// A master that says nothing at all is down, and ErrQuorumUnreachable
// keeps its meaning: three masters paused for good fail the TryLock with
// it, once they have been silent for the lock's TTL; a TryLock after that
// fails within a few master timeouts, as before, since they are known to be
// down; and
// once they answer again, the next TryLock gets its lock.
func TestSilentMastersAreUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 2 * time.Second
		e, fs, _ := slowMasters(t, api.WithTTL(ttl))
		defer e.Close()
		ctx := context.Background()
		for _, f := range fs[:3] {
			f.Pause()
		}
		t0 := time.Now()
		_, err := e.TryLock(ctx, "silent")
		if !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("TryLock with three masters silent: %v, want ErrQuorumUnreachable", err)
		}
		if took := time.Since(t0); took > ttl+time.Second {
			t.Fatalf("TryLock with three masters silent took %v: longer than their TTL of silence and a retry", took)
		}
		t1 := time.Now()
		_, err = e.TryLock(ctx, "silent-2")
		if !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("second TryLock with three masters silent: %v, want ErrQuorumUnreachable", err)
		}
		if took := time.Since(t1); took > 400*time.Millisecond {
			t.Fatalf("second TryLock with three masters known silent took %v, want a few master timeouts (the attempt, its cleanup, a background release ahead of it), not the TTL again", took)
		}
		for _, f := range fs[:3] {
			f.Resume()
		}
		l, err := e.TryLock(ctx, "back")
		if err != nil {
			t.Fatalf("TryLock after the masters answer again: %v", err)
		}
		_ = l.Unlock(ctx)
	})
}

// slowFence times out (its master silent past the deadline) on the first
// batch that carries a fencing write-back, and is healthy otherwise.
type slowFence struct {
	transport.Transport
	fired atomic.Bool
}

func (m *slowFence) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(m.Transport)
}

func (m *slowFence) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.RaiseFence && m.fired.CompareAndSwap(false, true) {
			<-ctx.Done()
			return transport.Fail(res, ctx.Err())
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

// The same for a fenced TryLock's second round trip: three masters that
// granted the SET are slow to confirm the token. The attempt is overload,
// retried (its token then larger), not unreachable masters.
func TestSlowFenceWriteBackIsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts := memoryMasters(5)
		for i := range 3 {
			ts[i] = &slowFence{Transport: ts[i]}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "slow-fence", api.WithFencing(true))
		if err != nil {
			t.Fatalf("fenced TryLock whose write-back three healthy masters confirmed late: %v (unreachable: %v); want the lock from a retry",
				err, errors.Is(err, api.ErrQuorumUnreachable))
		}
		if l.Token() < 2 {
			t.Fatalf("token %d: the retry's increments should have given at least 2", l.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i, m := range ms {
			if m.Len() != 0 {
				t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
			}
		}
	})
}
