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
)

func hasExtend(ops []transport.Op) bool {
	return slices.ContainsFunc(ops, func(op transport.Op) bool { return op.Kind == transport.Extend })
}

// gateExtends holds every batch with an Extend in it, once armed, until open
// is closed (or the batch's context ends), and says so on entered.
type gateExtends struct {
	transport.Transport
	armed   atomic.Bool
	entered chan time.Time
	open    chan struct{}
}

func (g *gateExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if g.armed.Load() && hasExtend(ops) {
		select {
		case g.entered <- time.Now():
		default:
		}
		select {
		case <-g.open:
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
	}
	return g.Transport.Do(ctx, ops, res)
}

// Done closes at Until even while the user's Extend is out and holds the
// handle: the auto-extension that falls due meanwhile must not take the
// deadline down with it while it waits its turn.
func TestDoneOnTimeWhileExtendHeld(t *testing.T) {
	const ttl = time.Second
	_, ts := memoryMasters(3)
	open := make(chan struct{})
	entered := make(chan time.Time, len(ts))
	gates := make([]*gateExtends, len(ts))
	for i := range ts {
		gates[i] = &gateExtends{Transport: ts[i], entered: entered, open: open}
		ts[i] = gates[i]
	}
	// The master timeout outlasts the test: only the gate ends the Extend.
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithMasterTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	l, err := e.TryLock(ctx, "held", api.WithAutoExtend(0.9))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gates {
		g.armed.Store(true)
	}
	extended := make(chan error, 1)
	go func() { extended <- l.Extend(ctx) }()
	var opened bool
	release := func() error {
		if !opened {
			opened = true
			close(open)
		}
		return <-extended
	}
	defer func() {
		if !opened {
			_ = release()
		}
	}()
	in := <-entered
	// The auto-extension falls due at 90% of the validity, no earlier than
	// Until-ttl/10; the user's Extend must be out before it to hold the
	// handle when it does.
	if due := l.Until().Add(-ttl / 10); !in.Before(due) {
		t.Skipf("the user's Extend reached the masters %v after the auto-extension fell due: the machine is too slow to set this up", in.Sub(due))
	}
	const grace = 5 * time.Second // scheduling on a loaded machine, not a design allowance
	select {
	case <-l.Done():
	case <-time.After(time.Until(l.Until()) + grace):
		t.Fatalf("Done still open %v past Until while an Extend was held (auto-extension blocked on the handle); Err = %v", time.Since(l.Until()), l.Err())
	}
	if now := time.Now(); now.Before(l.Until()) {
		t.Fatalf("Done closed %v before Until", l.Until().Sub(now))
	}
	if err := l.Err(); !errors.Is(err, api.ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", err)
	}
	if err := release(); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("the held Extend, let go past Until: %v, want ErrNotHeld", err)
	}
}

// After Close every lock of the engine says so, watched or not, and Done of
// a lock nobody watched is closed at once instead of arming a timer.
func TestCloseEndsUnwatchedLocks(t *testing.T) {
	e, err := engine.NewMemory(3) // TTL 10s: nothing expires during the test
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ls []api.Lock
	for _, k := range []string{"err-first", "done-first", "extend-first"} {
		l, err := e.TryLock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if err := e.Close(); err != nil {
		t.Error(err)
	}
	if err := ls[0].Err(); !errors.Is(err, api.ErrClosed) {
		t.Errorf("Err of an unwatched lock after Close = %v, want ErrClosed", err)
	}
	select {
	case <-ls[1].Done():
	default:
		t.Error("Done of an unwatched lock after Close is open (and armed a timer on a closed engine)")
	}
	if err := ls[1].Err(); !errors.Is(err, api.ErrClosed) {
		t.Errorf("Err after Done after Close = %v, want ErrClosed", err)
	}
	if err := ls[2].Extend(ctx); !errors.Is(err, api.ErrClosed) {
		t.Errorf("Extend after Close = %v, want ErrClosed", err)
	}
	if err := ls[2].Err(); !errors.Is(err, api.ErrClosed) {
		t.Errorf("Err after Extend after Close = %v, want ErrClosed", err)
	}
	for i, l := range ls {
		select {
		case <-l.Done():
		default:
			t.Errorf("lock %d: Done open after Close", i)
		}
	}
}

// watchAcquires reports the key of every single-key Acquire a master
// refused.
type watchAcquires struct {
	transport.Transport
	refused chan string
}

func (w *watchAcquires) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	err := w.Transport.Do(ctx, ops, res)
	for i, op := range ops {
		if op.Kind == transport.Acquire && op.Keys == nil && res[i].Err == nil && !res[i].OK {
			select {
			case w.refused <- op.Key:
			default:
			}
		}
	}
	return err
}

// Unlocking a multi-key lock wakes the local waiters of every one of its
// keys, in its own coordinator shard and in others, not only of its first.
func TestMultiKeyUnlockWakesEveryKey(t *testing.T) {
	_, ts := memoryMasters(3)
	refused := make(chan string, 64)
	for i := range ts {
		ts[i] = &watchAcquires{Transport: ts[i], refused: refused}
	}
	// A waiter that is not woken retries after a minute: far longer than
	// any wake-up could take.
	const backoff = time.Minute
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithCoordinators(2),
		api.WithRetry(api.Retry{InitialInterval: backoff, MaxInterval: backoff, Multiplier: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	first := "a"
	var other, same string // a key in another shard than first's, and one in the same
	for i := 0; other == "" || same == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if engine.ShardOf(e, k) != engine.ShardOf(e, first) {
			other = cmpOr(other, k)
		} else {
			same = cmpOr(same, k)
		}
	}
	if engine.ShardOf(e, other) == engine.ShardOf(e, first) || engine.ShardOf(e, same) != engine.ShardOf(e, first) {
		t.Fatalf("shards: %q %d, %q %d, %q %d", first, engine.ShardOf(e, first), other, engine.ShardOf(e, other), same, engine.ShardOf(e, same))
	}
	ctx := context.Background()
	holder, err := e.LockAll(ctx, []string{first, other, same})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		key string
		err error
	}
	got := make(chan result, 2)
	for _, k := range []string{other, same} {
		go func() {
			l, err := e.Lock(wctx, k)
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- result{k, err}
		}()
	}
	received := 0
	defer func() {
		cancel() // a waiter left behind ends with its context
		for ; received < cap(got); received++ {
			<-got
		}
	}()
	// Each waiter's first attempt is refused by every master; then it
	// backs off for a minute unless the Unlock wakes it.
	left := map[string]int{other: len(ts), same: len(ts)}
	for left[other]+left[same] > 0 {
		select {
		case k := <-refused:
			left[k]--
		case <-time.After(30 * time.Second):
			t.Fatalf("the waiters' first attempts were not refused: %v left", left)
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	woken := map[string]bool{}
	timeout := time.After(backoff / 4)
	for len(woken) < 2 {
		select {
		case r := <-got:
			received++
			if r.err != nil {
				t.Fatalf("waiter of %q: %v", r.key, r.err)
			}
			woken[r.key] = true
		case <-timeout:
			t.Fatalf("after Unlock of [%s %s %s]: woken %v; the waiter of %q (other shard) or %q (same shard) still sleeps in its %v backoff",
				first, other, same, woken, other, same, backoff)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// slowExtends delays every batch with an Extend in it by delay and, if
// starts is set, reports when each began.
type slowExtends struct {
	transport.Transport
	delay  time.Duration
	starts chan time.Time
}

func (s *slowExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if hasExtend(ops) {
		if s.starts != nil {
			select {
			case s.starts <- time.Now():
			default:
			}
		}
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
	}
	return s.Transport.Do(ctx, ops, res)
}

// A slow auto-extension with a small share does not make the next one fire
// at once: the next is due no sooner than that share of the validity left
// when the slow one returned, so extensions cannot run back to back and use
// up MaxExtensions. (Under synctest the clock is exact.)
func TestSlowAutoExtensionNotBackToBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			ttl   = time.Second
			auto  = 0.2
			delay = 300 * time.Millisecond // more than auto*validity
			n     = 8
		)
		drift := ttl/100 + 2*time.Millisecond
		_, ts := memoryMasters(3)
		starts := make(chan time.Time, 1000)
		for i := range ts {
			s := &slowExtends{Transport: ts[i], delay: delay}
			if i == 0 {
				s.starts = starts
			}
			ts[i] = s
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithMasterTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "slow", api.WithAutoExtend(auto), api.WithMaxExtensions(1000))
		if err != nil {
			t.Fatal(err)
		}
		var at []time.Time
		for len(at) < n {
			select {
			case s := <-starts:
				at = append(at, s)
			case <-l.Done():
				t.Fatalf("lost after %d extensions: %v", len(at), l.Err())
			}
		}
		// Extension i returns delay after it began, valid until
		// ttl-delay-drift after it began: the next may begin no sooner
		// than auto of what is left then.
		left := ttl - 2*delay - drift
		least := delay + time.Duration(auto*float64(left))
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < least-time.Millisecond {
				t.Fatalf("extension %d began %v after the one before, which took %v: want at least %v (the share %v of the %v left); all starts: %v",
					i+1, gap, delay, least, auto, left, gaps(at))
			}
		}
		// No Unlock: it would wait on the handle's mutex for the extension
		// in flight, and synctest's clock stands still while a goroutine
		// waits on a mutex. Close ends the lock and the extension.
	})
}

func gaps(at []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(at); i++ {
		d = append(d, at[i].Sub(at[i-1]))
	}
	return d
}
