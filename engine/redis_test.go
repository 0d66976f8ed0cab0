package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
)

// fiveMasters starts five real redis-server processes and an engine over
// them.
func fiveMasters(t *testing.T, opts ...api.Option) ([]*redistest.Server, *engine.Engine) {
	t.Helper()
	servers := redistest.Start(t, 5)
	e := redisEngine(t, servers, opts...)
	return servers, e
}

func redisEngine(t *testing.T, servers []*redistest.Server, opts ...api.Option) *engine.Engine {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	// The harness's masters were born with the test and have nothing to
	// forget; tests of the quarantine turn it back on explicitly. The
	// default 100ms master timeout is a production figure: on a loaded
	// machine under -race a live local Redis can take longer, and tests
	// that are not about timeouts must not fail on one (tests that are set
	// their own).
	base := []api.Option{api.WithoutRestartQuarantine(), api.WithMasterTimeout(2 * time.Second)}
	e, err := engine.New(addrs, append(base, opts...)...)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	// The transports connect in the background; wait until every master
	// has granted one lock, so that tests start from a known state.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := e.TryLock(context.Background(), "warmup")
		if err == nil {
			all := true
			for _, s := range servers {
				if v, ok := s.Get(t, "warmup"); !ok || v != l.Value() {
					all = false
				}
			}
			_ = l.Unlock(context.Background())
			if all {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("masters not ready after 30s: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // poll: the transports report no "connected" event
	}
}

func noKeys(t *testing.T, servers []*redistest.Server, key string) {
	t.Helper()
	for i, s := range servers {
		if v, ok := s.Get(t, key); ok {
			t.Errorf("master %d (%s) still holds %q = %q", i, s.Addr, key, v)
		}
	}
}

func TestRedisMutualExclusion(t *testing.T) {
	_, e := fiveMasters(t)
	mutualExclusion(t, e, 200, 5, []string{"inv:a", "inv:b", "inv:c", "inv:d"})
}

func TestRedisValidityAndUnlockLeavesNothing(t *testing.T) {
	servers, e := fiveMasters(t)
	l, err := e.TryLock(context.Background(), "job", api.WithTTL(2*time.Second))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if !l.Until().Before(after.Add(2*time.Second-22*time.Millisecond)) || !l.Until().After(after) {
		t.Fatalf("validity ends %v after TryLock returned; want in (0, ttl-drift)", l.Until().Sub(after))
	}
	// The decision comes at a majority; the last SETs land just after.
	holding := func() (n int) {
		for _, s := range servers {
			if v, ok := s.Get(t, "job"); ok && v == l.Value() {
				n++
			}
		}
		return n
	}
	if n := holding(); n < 3 {
		t.Fatalf("%d masters hold our value right after TryLock; want a majority", n)
	}
	// A poll: a SET landing on a real Redis after the decision is no event.
	for deadline := time.Now().Add(10 * time.Second); holding() < 5; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 5 live masters hold our value", holding())
		}
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	noKeys(t, servers, "job")
}

func TestRedisHeldWithTwoDown(t *testing.T) {
	servers, e := fiveMasters(t)
	servers[0].Kill()
	servers[3].Kill()
	l, err := e.TryLock(context.Background(), "two-down")
	if err != nil {
		t.Fatalf("TryLock with 3 of 5 up: %v", err)
	}
	if _, err := e.TryLock(context.Background(), "two-down"); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock with 3 of 5 up: %v", err)
	}
	noKeys(t, []*redistest.Server{servers[1], servers[2], servers[4]}, "two-down")
}

func TestRedisQuorumUnreachableFast(t *testing.T) {
	// A long master timeout: if the engine waited on dead masters instead
	// of deciding as soon as a majority is impossible, it would show.
	servers, e := fiveMasters(t, api.WithMasterTimeout(3*time.Second))
	for _, s := range servers[:3] {
		s.Kill()
	}
	start := time.Now()
	_, err := e.TryLock(context.Background(), "three-down")
	took := time.Since(start)
	if !errors.Is(err, api.ErrQuorumUnreachable) || errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryLock with 2 of 5 up: %v, want ErrQuorumUnreachable only", err)
	}
	if took >= 3*time.Second {
		t.Fatalf("took %v: waited for the master timeout instead of failing fast", took)
	}
	noKeys(t, servers[3:], "three-down")
}

func TestRedisFailedAttemptLeavesNoKey(t *testing.T) {
	servers, e := fiveMasters(t)
	// Another client holds the key on three masters.
	for _, s := range servers[:3] {
		s.Do(t, nil, "SET", "taken", "someone-else", "PX", "60000")
	}
	_, err := e.TryLock(context.Background(), "taken")
	if !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	noKeys(t, servers[3:], "taken")
	for _, s := range servers[:3] {
		if v, _ := s.Get(t, "taken"); v != "someone-else" {
			t.Fatalf("%s: the other owner's key became %q", s.Addr, v)
		}
	}
}

func TestRedisTakenVersusUnreachable(t *testing.T) {
	servers, e := fiveMasters(t)
	held, err := e.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	_, taken := e.TryLock(context.Background(), "k")
	servers[0].Kill()
	servers[1].Kill()
	servers[2].Kill()
	_, down := e.TryLock(context.Background(), "k2")
	if !errors.Is(taken, api.ErrNotAcquired) || errors.Is(taken, api.ErrQuorumUnreachable) {
		t.Fatalf("taken: %v", taken)
	}
	if !errors.Is(down, api.ErrQuorumUnreachable) || errors.Is(down, api.ErrNotAcquired) {
		t.Fatalf("down: %v", down)
	}
	_ = held
}

func TestRedisExtendWithinValidityAndByMajority(t *testing.T) {
	servers, e := fiveMasters(t)
	ctx := context.Background()
	l, err := e.TryLock(ctx, "ext", api.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a majority: let the last SETs land before keys are
	// deleted under them.
	waitHolders(t, servers, "ext", l.Value(), 5)
	// Two masters lose the key: a majority still holds it.
	servers[0].Do(t, nil, "DEL", "ext")
	servers[1].Do(t, nil, "DEL", "ext")
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("Extend with 3 of 5 holding: %v", err)
	}
	var pttl int
	servers[4].Do(t, &pttl, "PTTL", "ext")
	if pttl <= 900 {
		t.Fatalf("PTTL after extend = %dms, want about 1000", pttl)
	}
	// A third one loses it: no majority, and nothing is re-created.
	servers[2].Do(t, nil, "DEL", "ext")
	if err := l.Extend(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Extend with 2 of 5 holding: %v", err)
	}
	noKeys(t, servers[:3], "ext")
	_ = l.Unlock(ctx)
	noKeys(t, servers, "ext")
}

// sentSignal tells sent each time a batch goes to the master.
type sentSignal struct {
	transport.Transport
	sent chan<- struct{}
}

func (s sentSignal) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	select {
	case s.sent <- struct{}{}:
	default:
	}
	return s.Transport.Do(ctx, ops, res)
}

func TestRedisCancelledContextReturnsPromptly(t *testing.T) {
	servers := redistest.Start(t, 5)
	sent := make(chan struct{}, 1)
	ts := make([]transport.Transport, len(servers))
	for i, s := range servers {
		rt, err := redis.Dial(context.Background(), redis.Config{Addr: s.Addr})
		if err != nil {
			t.Fatal(err)
		}
		ts[i] = rt
		if i < 3 {
			ts[i] = sentSignal{rt, sent}
		}
	}
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	for _, s := range servers[:3] {
		s.Pause()
	}
	t.Cleanup(func() {
		for _, s := range servers[:3] {
			s.Resume()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Lock(ctx, "paused")
		done <- err
	}()
	select { // the attempt is out, waiting on a paused master
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("Lock sent nothing to the masters within 30s")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second): // a Lock that waited for the masters would take 30s
		t.Fatal("Lock did not return after cancel while masters were paused")
	}
}

// A TryLock right after New must not fail because the transports are still
// connecting: they wait for their first connection attempt.
func TestRedisFirstTryLockAfterNew(t *testing.T) {
	servers := redistest.Start(t, 5)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	for i := 0; i < 10; i++ {
		e, err := engine.New(addrs, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		l, err := e.TryLock(context.Background(), "first")
		if err != nil {
			e.Close()
			t.Fatalf("engine %d: first TryLock: %v", i, err)
		}
		_ = l.Unlock(context.Background())
		_ = e.Close()
	}
}
