package engine_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/check"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMemory(t *testing.T, n int, opts ...api.Option) *engine.Engine {
	t.Helper()
	e, err := engine.NewMemory(n, opts...)
	if err != nil {
		t.Fatalf("NewMemory: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// mutualExclusion runs goroutines that each take one of keys in turn and do
// a read-modify-write on a plain counter inside the lock. Without exclusion
// the counters come out short and the overlap detector fires.
func mutualExclusion(t *testing.T, l api.Locker, goroutines, rounds int, keys []string) {
	t.Helper()
	counters := make([]int, len(keys))
	inside := make([]atomic.Int32, len(keys))
	var overlaps atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				k := (g + r) % len(keys)
				lk, err := l.Lock(context.Background(), keys[k], api.WithTTL(5*time.Second))
				if err != nil {
					errs <- err
					return
				}
				if inside[k].Add(1) != 1 {
					overlaps.Add(1)
				}
				v := counters[k]
				runtime.Gosched() // widen the window a lost update needs
				counters[k] = v + 1
				inside[k].Add(-1)
				if err := lk.Unlock(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("lock/unlock: %v", err)
	}
	total := 0
	for _, c := range counters {
		total += c
	}
	if total != goroutines*rounds || overlaps.Load() != 0 {
		t.Fatalf("counters sum to %d, want %d; %d overlapping critical sections", total, goroutines*rounds, overlaps.Load())
	}
}

func TestMemoryMutualExclusion(t *testing.T) {
	e := newMemory(t, 5)
	mutualExclusion(t, e, 200, 5, []string{"a", "b", "c"})
}

func TestTryLockTakenThenFree(t *testing.T) {
	e := newMemory(t, 5)
	ctx := context.Background()
	l1, err := e.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l1.Value() == "" || l1.Key() != "job" {
		t.Fatalf("key %q value %q", l1.Key(), l1.Value())
	}
	_, err = e.TryLock(ctx, "job")
	if !errors.Is(err, api.ErrNotAcquired) || errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired only", err)
	}
	var ae *api.Error
	if !errors.As(err, &ae) || len(ae.Masters) != 5 || ae.Attempts != 1 {
		t.Fatalf("error detail: %#v", ae)
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := e.TryLock(ctx, "job")
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if l2.Value() == l1.Value() {
		t.Fatal("two grants share a value")
	}
	_ = l2.Unlock(ctx)
}

func TestValidityBelowTTL(t *testing.T) {
	e := newMemory(t, 5)
	l, err := e.TryLock(context.Background(), "v", api.WithTTL(time.Second))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// The attempt began before TryLock returned, and validity counts from
	// its start: Until <= start + ttl - drift < after + ttl - drift.
	drift := 10*time.Millisecond + 2*time.Millisecond
	if max := after.Add(time.Second - drift); !l.Until().Before(max) {
		t.Fatalf("validity ends %v after TryLock returned; must be under ttl-drift = %v", l.Until().Sub(after), time.Second-drift)
	}
	if !l.Until().After(time.Now()) {
		t.Fatal("validity already over")
	}
}

func TestUnlockTwiceAndExtend(t *testing.T) {
	synctest.Test(t, testUnlockTwiceAndExtend)
}

func testUnlockTwiceAndExtend(t *testing.T) {
	masters := []*memory.Master{memory.New(), memory.New(), memory.New()}
	ts := make([]transport.Transport, len(masters))
	for i, m := range masters {
		ts[i] = m.Transport()
	}
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(200*time.Millisecond), api.WithMaxExtensions(2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	l, err := e.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	u0 := l.Until()
	time.Sleep(20 * time.Millisecond) // fake time: Extend must then move Until
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if !l.Until().After(u0) {
		t.Fatal("Extend did not move Until")
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("second extend: %v", err)
	}
	if err := l.Extend(ctx); !errors.Is(err, api.ErrNotHeld) || !strings.Contains(err.Error(), "extensions") {
		t.Fatalf("third extend over a limit of 2: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, m := range masters {
		if m.Len() != 0 {
			t.Fatalf("master %d still holds %d keys after Unlock", i, m.Len())
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	if err := l.Extend(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Extend after Unlock: %v", err)
	}
}

func TestExtendAfterExpiryRefusedAndNotRecreated(t *testing.T) {
	synctest.Test(t, testExtendAfterExpiryRefusedAndNotRecreated)
}

func testExtendAfterExpiryRefusedAndNotRecreated(t *testing.T) {
	masters := []*memory.Master{memory.New(), memory.New(), memory.New()}
	ts := make([]transport.Transport, len(masters))
	for i, m := range masters {
		ts[i] = m.Transport()
	}
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(context.Background(), "short")
	if err != nil {
		t.Fatal(err)
	}
	// Fake time: past the validity and past the key's expiry on the masters
	// (validity is the TTL less the drift, counted from before the SETs).
	time.Sleep(time.Until(l.Until()) + 20*time.Millisecond)
	if err := l.Extend(context.Background()); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Extend after validity: %v", err)
	}
	for i, m := range masters {
		if _, ok := m.Get("short"); ok {
			t.Fatalf("master %d holds the key again", i)
		}
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Unlock of an expired lock: %v", err)
	}
}

// Restarting a majority of in-memory masters loses the lock; Extend must
// then be refused by the majority (not re-created) even within validity.
func TestExtendRefusedByMajority(t *testing.T) {
	synctest.Test(t, testExtendRefusedByMajority)
}

func testExtendRefusedByMajority(t *testing.T) {
	masters := []*memory.Master{memory.New(), memory.New(), memory.New(), memory.New(), memory.New()}
	ts := make([]transport.Transport, len(masters))
	for i, m := range masters {
		ts[i] = m.Transport()
	}
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a majority; a SET still on its way could land on a
	// master after the restart below and make it a holder again. Once the
	// bubble is idle, every SET has landed.
	synctest.Wait()
	for i, m := range masters {
		if v, ok := m.Get("k"); !ok || v != l.Value() {
			t.Fatalf("master %d: the SET never landed (%q, %v)", i, v, ok)
		}
	}
	masters[0].Restart()
	masters[1].Restart()
	if err := l.Extend(context.Background()); err != nil {
		t.Fatalf("Extend with 3 of 5 still holding: %v", err)
	}
	masters[2].Restart()
	if err := l.Extend(context.Background()); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Extend with 2 of 5 holding: %v", err)
	}
	for i := 0; i < 3; i++ {
		if _, ok := masters[i].Get("k"); ok {
			t.Fatalf("Extend re-created the key on restarted master %d", i)
		}
	}
	_ = l.Unlock(context.Background())
}

func TestCancelledContext(t *testing.T) {
	e := newMemory(t, 5)
	held, err := e.TryLock(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Lock(ctx, "busy"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled context: %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.Lock(ctx, "busy")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, api.ErrNotAcquired) {
			t.Fatalf("Lock until deadline: %v, want DeadlineExceeded wrapping the last attempt's ErrNotAcquired", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not return after its context ended")
	}
}

func TestMaxAttempts(t *testing.T) {
	e := newMemory(t, 3)
	held, err := e.TryLock(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	_, err = e.Lock(context.Background(), "m", api.WithMaxAttempts(3))
	var ae *api.Error
	if !errors.As(err, &ae) || !errors.Is(err, api.ErrNotAcquired) || ae.Attempts != 3 {
		t.Fatalf("Lock with 3 attempts on a held key: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	e := newMemory(t, 3)
	// A deadline, so that a check that lets bad input through to the
	// masters fails with a message rather than a Lock that retries forever.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lockCases := []struct {
		name string
		key  string
		opts []api.LockOption
		hint string
	}{
		{"empty key", "", nil, "empty key"},
		{"oversized key", strings.Repeat("k", check.MaxKeyLen+1), nil, "limit"},
		{"zero ttl", "k", []api.LockOption{api.WithTTL(0)}, "must be positive"},
		{"negative ttl", "k", []api.LockOption{api.WithTTL(-time.Second)}, "must be positive"},
		{"ttl too short for drift", "k", []api.LockOption{api.WithTTL(2 * time.Millisecond)}, "at least"},
		// An engine-wide option (WithMasterTimeout, ...) given to Lock is
		// not here: it does not compile (api.TestOptionKinds).
		{"bad retry", "k", []api.LockOption{api.WithRetry(api.Retry{})}, "initial interval"},
		{"negative attempts", "k", []api.LockOption{api.WithMaxAttempts(-1)}, "max attempts"},
	}
	for _, tc := range lockCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, try := range []func(context.Context, string, ...api.LockOption) (api.Lock, error){e.Lock, e.TryLock} {
				_, err := try(ctx, tc.key, tc.opts...)
				var ae *api.Error
				if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.hint) {
					t.Fatalf("got %v; want a typed invalid-argument error mentioning %q", err, tc.hint)
				}
			}
		})
	}

	newCases := []struct {
		name string
		new  func() (*engine.Engine, error)
		hint string
	}{
		{"no masters", func() (*engine.Engine, error) { return engine.New(nil) }, "no masters"},
		{"no transports", func() (*engine.Engine, error) { return engine.NewWithTransports(nil) }, "no masters"},
		{"zero memory masters", func() (*engine.Engine, error) { return engine.NewMemory(0) }, "need 1"},
		{"duplicate masters", func() (*engine.Engine, error) {
			return engine.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7001"})
		}, "vote twice"},
		{"duplicate via URL", func() (*engine.Engine, error) {
			return engine.New([]string{"127.0.0.1:7001", "redis://127.0.0.1:7001/2"})
		}, "vote twice"},
		{"duplicate transport", func() (*engine.Engine, error) {
			tr := memory.New().Transport()
			return engine.NewWithTransports([]transport.Transport{tr, tr})
		}, "vote twice"},
		{"nil transport", func() (*engine.Engine, error) { return engine.NewWithTransports([]transport.Transport{nil}) }, "nil transport"},
		{"missing port", func() (*engine.Engine, error) { return engine.New([]string{"localhost"}) }, "master 1"},
		{"bad port", func() (*engine.Engine, error) { return engine.New([]string{"127.0.0.1:abc"}) }, "master 1"},
		{"bad scheme", func() (*engine.Engine, error) { return engine.New([]string{"127.0.0.1:1", "http://h:1"}) }, "master 2"},
		{"bad option", func() (*engine.Engine, error) { return engine.NewMemory(3, api.WithDriftFactor(0.7)) }, "drift factor"},
	}
	for _, tc := range newCases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := tc.new()
			if err == nil {
				e.Close()
				t.Fatal("no error")
			}
			var ae *api.Error
			if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("got %v; want a typed invalid-argument error mentioning %q", err, tc.hint)
			}
		})
	}
}

func TestClose(t *testing.T) {
	synctest.Test(t, testClose)
}

func testClose(t *testing.T) {
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	held, err := e.TryLock(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := e.Lock(context.Background(), "c")
		waiting <- err
	}()
	time.Sleep(20 * time.Millisecond) // fake time: let the waiter retry at least once
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-waiting; !errors.Is(err, api.ErrClosed) {
		t.Fatalf("Lock in progress at Close: %v", err)
	}
	if _, err := e.TryLock(context.Background(), "d"); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("TryLock after Close: %v", err)
	}
	if err := held.Unlock(context.Background()); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("Unlock after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
