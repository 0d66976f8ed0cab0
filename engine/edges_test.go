package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
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
