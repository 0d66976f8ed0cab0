package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redistest"
)

// untilVoting retries TryLock on a key nobody else uses until it succeeds:
// every master the engine needs has then been read and is out of quarantine.
func untilVoting(t *testing.T, e *engine.Engine, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l, err := e.TryLock(context.Background(), "probe:"+t.Name())
		if err == nil {
			_ = l.Unlock(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("masters not voting after %v: %v", within, err)
		}
		// A poll: the end of a real master's quarantine (or its first
		// connection) is no event the engine reports.
		time.Sleep(20 * time.Millisecond)
	}
}

// The scenario of the restart quarantine (README, "Guarantees, and their
// limits"): a lock held on A, B and C of five; C restarts empty. With the quarantine, a second engine cannot reach a majority for
// the key until C's quarantine has passed; without it, it can at once, and
// two owners hold one lock: the failure the quarantine prevents, and the
// proof that this test can fail.
func TestQuarantineKeepsRestartedMasterOut(t *testing.T) {
	const period = 3 * time.Second
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "quarantine", false: "no-quarantine"}[on]
		t.Run(name, func(t *testing.T) {
			servers := redistest.Start(t, 5)
			q := api.WithRestartQuarantine(period)
			if !on {
				q = api.WithoutRestartQuarantine()
			}
			addrs := make([]string, len(servers))
			for i, s := range servers {
				addrs[i] = s.Addr
			}
			newEngine := func() *engine.Engine {
				// A master timeout far above a loaded machine's Redis
				// latency: a slow answer is not the subject here.
				e, err := engine.New(addrs, api.WithTTL(period), q, api.WithMasterTimeout(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = e.Close() })
				return e
			}
			a := newEngine()
			untilVoting(t, a, 3*period) // fresh masters sit out one period
			// Without the quarantine the overlap is shown by a lock that is
			// still valid long after the restart however slow the machine
			// (a restart plus a new engine's connections); with it, the
			// lock's ttl must not exceed the quarantine, as in production.
			ttl := period
			if !on {
				ttl = time.Minute
			}
			held, err := a.TryLock(context.Background(), "k", api.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			waitHolders(t, servers, "k", held.Value(), 5)
			// Only A, B, C (servers 0-2) hold it: D and E never got it.
			servers[3].Do(t, nil, "DEL", "k")
			servers[4].Do(t, nil, "DEL", "k")
			servers[2].Kill()
			servers[2].Restart(t)
			restarted := time.Now()

			b := newEngine()
			// b must have connected to (and read) the masters before the
			// check means anything: three of them vote on a probe key.
			untilVoting(t, b, 3*period)
			if !on {
				// C has granted b's probe of k: it was connected, and two
				// more (D, E) are free, so this TryLock is a majority.
				var l2 api.Lock
				for {
					l2, err = b.TryLock(context.Background(), "k")
					if err == nil {
						break
					}
					if a, _ := masterAnswer(t, err, servers[2].Addr); a == api.Refused {
						t.Fatalf("the restarted master refused k: it was not empty: %v", err)
					}
					if time.Since(restarted) > 3*period {
						t.Fatalf("without quarantine the restarted master votes once connected, so this should succeed: %v", err)
					}
					time.Sleep(20 * time.Millisecond) // poll: C's reconnection is no event b reports
				}
				if !time.Now().Before(held.Until()) {
					t.Fatalf("the first lock (ttl %v) expired before the check", ttl)
				}
				t.Logf("two owners of one lock: the first valid for another %v", time.Until(held.Until()))
				_ = l2.Unlock(context.Background())
				return
			}
			// Until b has read C, C does not answer for k at all; once it
			// has, C answers ErrQuarantined, and never a vote before the
			// quarantine ends.
			for {
				l2, err := b.TryLock(context.Background(), "k")
				if err == nil {
					since := time.Since(restarted)
					if since < period {
						t.Fatalf("a second owner got the lock %v after the restart, inside the %v quarantine", since, period)
					}
					_ = l2.Unlock(context.Background())
					t.Fatalf("b never saw C quarantined: it first answered %v after the restart, past the %v quarantine", since, period)
				}
				a, aerr := masterAnswer(t, err, servers[2].Addr)
				if errors.Is(aerr, api.ErrQuarantined) {
					break
				}
				if a == api.Granted || a == api.Refused {
					t.Fatalf("the restarted master answered %v (%v), not ErrQuarantined: %v", a, aerr, err)
				}
				time.Sleep(20 * time.Millisecond) // poll: C's reconnection is no event b reports
			}
			// It gets the lock only once the first one is over: when its keys
			// on A and B expire, or when C's quarantine ends, whichever is
			// first (with ttl = period they are close).
			var l2 api.Lock
			for {
				l2, err = b.TryLock(context.Background(), "k")
				if err == nil {
					break
				}
				if time.Since(restarted) > 3*period {
					t.Fatalf("never got the lock after the quarantine: %v", err)
				}
				// A poll: the quarantine's end on a real master is time
				// passing, not an event.
				time.Sleep(20 * time.Millisecond)
			}
			if time.Now().Before(held.Until()) {
				t.Fatal("two owners: the second got the lock while the first was valid")
			}
			_ = l2.Unlock(context.Background())
		})
	}
}

func waitHolders(t *testing.T, servers []*redistest.Server, key, value string, n int) {
	t.Helper()
	// A poll: a SET landing on a real Redis after the decision is no event.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		got := 0
		for _, s := range servers {
			if v, ok := s.Get(t, key); ok && v == value {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d masters hold %s, want %d", got, key, n)
		}
	}
}

// Tokens strictly increase in grant order under contention, also across a
// master restart (with the quarantine on).
func TestFencingTokensIncrease(t *testing.T) {
	servers := redistest.Start(t, 5)
	e := redisEngine(t, servers, api.WithFencing(true))
	var mu sync.Mutex
	var tokens []int64
	run := func(goroutines, rounds int) {
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					l, err := e.Lock(context.Background(), "fenced")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock() // inside the lock: tokens append in grant order
					tokens = append(tokens, l.Token())
					mu.Unlock()
					_ = l.Unlock(context.Background())
				}
			}()
		}
		wg.Wait()
	}
	run(16, 10)
	// Restart one master empty: its counter is gone, the majority's is not.
	servers[1].Kill()
	servers[1].Restart(t)
	run(16, 10)
	if len(tokens) != 320 {
		t.Fatalf("%d grants, want 320", len(tokens))
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d = %d after %d: not strictly increasing", i, tokens[i], tokens[i-1])
		}
	}
	if tokens[0] < 1 {
		t.Fatalf("first token %d", tokens[0])
	}
}

// With masters paused, the lost-lock signal fires at the validity deadline
// of a lock nobody extends, and no later than it when auto-extension fails.
func TestLostSignalWhenMastersPause(t *testing.T) {
	for _, auto := range []float64{0, 0.5} {
		t.Run(map[float64]string{0: "deadline", 0.5: "auto-extend"}[auto], func(t *testing.T) {
			servers := redistest.Start(t, 5)
			e := redisEngine(t, servers, api.WithTTL(400*time.Millisecond), api.WithMasterTimeout(50*time.Millisecond))
			// Lock, not TryLock: one attempt's 50ms master timeout can run
			// out on a loaded machine before the masters are paused.
			l, err := lockWithin(t, e, "paused", api.WithAutoExtend(auto))
			if err != nil {
				t.Fatal(err)
			}
			done := l.Done()
			for _, s := range servers[:3] {
				s.Pause()
			}
			t.Cleanup(func() {
				for _, s := range servers[:3] {
					s.Resume()
				}
			})
			if auto == 0 {
				// Extension fails: the masters cannot confirm it.
				if err := l.Extend(context.Background()); !errors.Is(err, api.ErrQuorumUnreachable) {
					t.Fatalf("Extend with 3 of 5 paused: %v", err)
				}
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("lost-lock signal never fired")
			}
			firedAt := time.Now()
			if !errors.Is(l.Err(), api.ErrNotHeld) {
				t.Fatalf("Err = %v", l.Err())
			}
			// A failed extension may end it earlier; never later than the
			// deadline plus the scheduler's delay, which on a loaded machine
			// has no bound: lateLimit catches a missed deadline, not a slow
			// wake-up (TestDoneAtValidityDeadline pins the exact instant on
			// a fake clock).
			if late := firedAt.Sub(l.Until()); late > lateLimit {
				t.Fatalf("signal fired %v after the validity deadline", late)
			}
		})
	}
}

// lockWithin is Lock with a bound generous enough for a loaded machine.
func lockWithin(t *testing.T, e *engine.Engine, key string, opts ...api.LockOption) (api.Lock, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.Lock(ctx, key, opts...)
}

// lateLimit bounds how long after a lock's deadline its Done may be seen on a
// real clock. The engine arms a timer for the deadline itself, so anything
// past it is the time a loaded machine takes to run the timer and wake the
// waiter, which no test can bound: this only catches a signal that waited for
// something else (a master's answer, the next extension) instead of the
// deadline. The exact instant is pinned on a fake clock by
// TestDoneAtValidityDeadline.
const lateLimit = time.Second

// Without extension attempts, Done fires at the deadline itself, not
// before: the lock is good until then even with masters paused.
func TestLostSignalAtDeadline(t *testing.T) {
	servers := redistest.Start(t, 5)
	e := redisEngine(t, servers, api.WithTTL(time.Second))
	l, err := lockWithin(t, e, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	for _, s := range servers[:3] {
		s.Pause()
	}
	t.Cleanup(func() {
		for _, s := range servers[:3] {
			s.Resume()
		}
	})
	<-done
	firedAt := time.Now()
	// Not before the deadline: that is the property. How late a woken
	// goroutine runs is the scheduler's (see lateLimit).
	if d := firedAt.Sub(l.Until()); d < 0 || d > lateLimit {
		t.Fatalf("signal fired %v from the validity deadline; want within [0, %v]", d, lateLimit)
	}
	if !errors.Is(l.Err(), api.ErrExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	t.Logf("signal fired %v after the validity deadline", firedAt.Sub(l.Until()))
}
