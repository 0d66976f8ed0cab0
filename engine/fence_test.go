package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

var errScripted = errors.New("lost by the test's script")

// scripted is one engine's view of a master, with the faults a test scripts
// into it, op by op (a batch is applied one op at a time, in order).
type scripted struct {
	transport.Transport
	failAcquire bool          // AcquireFenced is lost: never applied, answered with an error
	dropRaise   bool          // RaiseFence likewise
	hold        chan struct{} // AcquireFenced waits until it is closed
	holding     chan struct{} // gets a value when an AcquireFenced starts to wait
	applied     chan struct{} // gets a value when an AcquireFenced was applied
}

func (s *scripted) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for i := range ops {
		switch op := &ops[i]; {
		case op.Kind == transport.AcquireFenced && s.failAcquire,
			op.Kind == transport.RaiseFence && s.dropRaise:
			res[i] = transport.Result{Err: errScripted}
			continue
		case op.Kind == transport.AcquireFenced && s.hold != nil:
			notify(s.holding)
			select {
			case <-s.hold:
			case <-ctx.Done():
				return transport.Fail(res, ctx.Err())
			}
		}
		if err := s.Transport.Do(ctx, ops[i:i+1], res[i:i+1]); err != nil {
			return transport.Fail(res, err)
		}
		if ops[i].Kind == transport.AcquireFenced {
			notify(s.applied)
		}
	}
	return nil
}

func notify(c chan struct{}) {
	if c != nil {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func waitFor(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
	}
}

// TestFenceOverlapEngine runs issue 9 finding 2 through two engines (two
// processes, say) over the same five masters A to E: one slow attempt of
// lock 2 spans the whole life of lock 1. Lock 2's SET reaches D first; its
// SETs to A and B are held back; lock 1 wins A, B, C with token 7 and its
// write-back is lost on A and B but lands on C, D, E; lock 1 unlocks; then
// lock 2's SETs reach A and B, and it holds D, A, B with token
// max(4, 6, 6) = 6. That token must never be granted: lock 2's token must be
// larger than lock 1's.
func TestFenceOverlapEngine(t *testing.T) {
	const key = "k"
	var ms []*memory.Master
	for i, n := range []int64{4, 4, 6, 3, 3} { // A..E's counters from earlier grants
		m := memory.New()
		res := make([]transport.Result, 1)
		c := m.Transport()
		if err := c.Do(t.Context(), []transport.Op{{Kind: transport.RaiseFence, Key: key, Value: "earlier", Token: n}}, res); err != nil || !res[0].OK {
			t.Fatalf("setting master %d's counter: %v %+v", i, err, res[0])
		}
		_ = c.Close()
		ms = append(ms, m)
	}
	const A, B, C, D, E = 0, 1, 2, 3, 4
	gate := make(chan struct{})
	holding := make(chan struct{}, 2)
	applied := make(chan struct{}, 1)
	views := func(script func(i int, s *scripted)) []transport.Transport {
		ts := make([]transport.Transport, len(ms))
		for i, m := range ms {
			s := &scripted{Transport: m.Transport()}
			script(i, s)
			ts[i] = s
		}
		return ts
	}
	newEngine := func(ts []transport.Transport) *engine.Engine {
		e, err := engine.NewWithTransports(ts,
			api.WithoutRestartQuarantine(), api.WithTTL(30*time.Second), api.WithMasterTimeout(20*time.Second),
			api.WithRetry(api.Retry{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, Multiplier: 2}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	// Lock 2's engine: its SETs to C and E are lost, to A and B held back.
	e2 := newEngine(views(func(i int, s *scripted) {
		switch i {
		case A, B:
			s.hold, s.holding = gate, holding
		case C, E:
			s.failAcquire = true
		case D:
			s.applied = applied
		}
	}))
	// Lock 1's engine: its SET to E is lost, and so are its write-backs to
	// A and B.
	e1 := newEngine(views(func(i int, s *scripted) {
		switch i {
		case A, B:
			s.dropRaise = true
		case E:
			s.failAcquire = true
		}
	}))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type result struct {
		l   api.Lock
		err error
	}
	lock2 := make(chan result, 1)
	go func() {
		l, err := e2.Lock(ctx, key, api.WithFencing(true))
		lock2 <- result{l, err}
	}()
	waitFor(t, "lock 2's SET on D", applied)
	waitFor(t, "lock 2's first held SET", holding)
	waitFor(t, "lock 2's second held SET", holding)

	l1, err := e1.Lock(ctx, key, api.WithFencing(true))
	if err != nil {
		t.Fatalf("lock 1: %v", err)
	}
	if l1.Token() != 7 {
		t.Fatalf("lock 1's token is %d, want 7: the schedule did not run as scripted", l1.Token())
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatalf("unlock lock 1: %v", err)
	}
	close(gate)
	r := <-lock2
	if r.err != nil {
		t.Fatalf("lock 2: %v", r.err)
	}
	defer r.l.Unlock(context.Background())
	if r.l.Token() <= l1.Token() {
		t.Fatalf("lock 2 was granted token %d after lock 1's %d: fencing tokens went backwards", r.l.Token(), l1.Token())
	}
}

// rivalRaise is a master on which a rival's write-back of a larger token
// lands just before each of ours: a newer grant of the key was seen there.
type rivalRaise struct{ transport.Transport }

func (r rivalRaise) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(r.Transport)
}

func (r rivalRaise) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		if op.Kind == transport.RaiseFence {
			rival := []transport.Op{{Kind: transport.RaiseFence, Key: op.Key, Value: "rival", Token: op.Token + 5}}
			if err := r.Transport.Do(ctx, rival, make([]transport.Result, 1)); err != nil {
				return transport.Fail(res, err)
			}
		}
	}
	return r.Transport.Do(ctx, ops, res)
}

// A write-back refused by a majority means a newer grant's token was seen
// there: the key is contended, the masters answered. TryLock must say
// "taken" (ErrNotAcquired), not "masters down" (ErrQuorumUnreachable).
func TestRefusedFenceIsTaken(t *testing.T) {
	ms := []*memory.Master{memory.New(), memory.New(), memory.New()}
	ts := []transport.Transport{rivalRaise{ms[0].Transport()}, rivalRaise{ms[1].Transport()}, ms[2].Transport()}
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.TryLock(context.Background(), "k")
	if !errors.Is(err, api.ErrNotAcquired) || errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatalf("TryLock whose write-back a majority refused: %v; want ErrNotAcquired", err)
	}
	for i, m := range ms {
		if v, ok := m.Get("k"); ok {
			t.Errorf("master %d still holds k=%q after the failed attempt", i, v)
		}
	}
}
