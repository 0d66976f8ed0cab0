package transporttest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A suite that passes everything proves nothing, so each mutant below breaks
// one rule of the contract on top of a sound memory master, and the suite
// must fail in the subtest that guards that rule. Failing tests cannot be
// observed from inside one test binary, so each mutant runs the suite in a
// child process (TestMutant) and the parent reads its verdict.
var mutants = []struct {
	name     string
	wantFail string // the subtest that must catch it; "" for the sound control
	wrap     func(m *memory.Master, c transport.Transport) transport.Transport
}{
	{"sound", "", func(m *memory.Master, c transport.Transport) transport.Transport { return c }},
	// A minimal transport: Acquire, Release and Extend on single keys and
	// nothing else. It passes the required part; the parts it lacks are
	// skipped.
	{"minimal", "", func(m *memory.Master, c transport.Transport) transport.Transport { return minimal{c, 0, nil} }},
	{"minimal with fencing", "", func(m *memory.Master, c transport.Transport) transport.Transport {
		return declared{minimal{c, transport.Fencing, nil}, transport.Fencing}
	}},
	{"minimal applies fenced acquires as plain ones", "unsupported", func(m *memory.Master, c transport.Transport) transport.Transport {
		return minimal{c, 0, func(op *transport.Op) bool {
			if op.Kind == transport.AcquireFenced {
				op.Kind = transport.Acquire
			}
			return op.Kind != transport.RaiseFence
		}}
	}},
	{"minimal applies multi-key releases to the first key", "unsupported", func(m *memory.Master, c transport.Transport) transport.Transport {
		return minimal{c, 0, func(op *transport.Op) bool {
			if op.Kind == transport.Release {
				op.Keys = nil
			}
			return len(op.Keys) < 2
		}}
	}},
	{"minimal answers unsupported ops with a refusal", "unsupported", func(m *memory.Master, c transport.Transport) transport.Transport {
		return perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			if transport.Needs(&op) != 0 {
				return transport.Result{} // "no", as if the master had answered
			}
			return one(c, op)
		})(m, minimal{c, 0, nil})
	}},
	{"minimal declares multi-key", "multi", func(m *memory.Master, c transport.Transport) transport.Transport {
		return declared{minimal{c, 0, nil}, transport.MultiKey}
	}},
	{"acquire overwrites", "acquire", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if v, held := m.Get(op.Key); held && op.Kind == transport.Acquire {
			one(c, transport.Op{Kind: transport.Release, Key: op.Key, Value: v})
		}
		return one(c, op)
	})},
	{"acquire check-then-set", "contend", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if op.Kind != transport.Acquire {
			return one(c, op)
		}
		if _, held := m.Get(op.Key); held {
			return transport.Result{}
		}
		time.Sleep(time.Millisecond) // the mutant's own race window, not the test's order
		if v, held := m.Get(op.Key); held {
			one(c, transport.Op{Kind: transport.Release, Key: op.Key, Value: v})
		}
		one(c, op)
		return transport.Result{OK: true}
	})},
	{"release ignores value", "release", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if v, held := m.Get(op.Key); held && op.Kind == transport.Release {
			op.Value = v
		}
		return one(c, op)
	})},
	{"extend is a no-op", "extend", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if v, held := m.Get(op.Key); op.Kind == transport.Extend {
			return transport.Result{OK: held && v == op.Value}
		}
		return one(c, op)
	})},
	{"extend creates", "extend", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if _, held := m.Get(op.Key); !held && op.Kind == transport.Extend {
			op.Kind = transport.Acquire
		}
		return one(c, op)
	})},
	{"ttl ignored", "expiry", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if op.Kind == transport.Acquire {
			op.TTL = time.Hour
		}
		return one(c, op)
	})},
	{"batch reversed", "order", func(m *memory.Master, c transport.Transport) transport.Transport {
		return doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			for i := len(ops) - 1; i >= 0; i-- {
				if err := c.Do(ctx, ops[i:i+1], res[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		}}
	}},
	{"results buffer shared by batches", "concurrent-do", func(m *memory.Master, c transport.Transport) transport.Transport {
		// One reply buffer for all callers, as a transport might keep per
		// connection: correct one batch at a time, garbled by concurrent
		// batches. Never reallocated, so the race garbles values but
		// cannot corrupt memory.
		scratch := make([]transport.Result, 4096)
		return doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			buf := scratch[:len(ops)]
			err := c.Do(ctx, ops, buf)
			runtime.Gosched()
			copy(res, buf)
			return err
		}}
	}},
	{"invalid op fails the batch", "errors", func(m *memory.Master, c transport.Transport) transport.Transport {
		return doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			for i := range ops {
				if err := transport.Check(&ops[i]); err != nil {
					return transport.Fail(res, err)
				}
			}
			return c.Do(ctx, ops, res)
		}}
	}},
	{"ctx ignored", "errors", func(m *memory.Master, c transport.Transport) transport.Transport {
		return doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			return c.Do(context.WithoutCancel(ctx), ops, res)
		}}
	}},
	{"close is a no-op", "close", func(m *memory.Master, c transport.Transport) transport.Transport {
		return noClose{c}
	}},
	{"run id per client", "optional", func(m *memory.Master, c transport.Transport) transport.Transport {
		return runIDPerClient{c, fmt.Sprint("run-", clients.Add(1))}
	}},

	// Fencing. The memory master's counters are only reachable through its
	// ops, so the mutants that need a counter to misbehave keep their own
	// (fakeFences); "sound fake fences" shows that the fake alone passes.
	{"fenced acquire does not count", "fenced", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if op.Kind != transport.AcquireFenced {
			return one(c, op)
		}
		op.Kind = transport.Acquire
		r := one(c, op)
		if r.OK {
			r.Token = 1
		}
		return r
	})},
	{"fenced acquire counts denials", "fenced", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		r := one(c, op)
		if op.Kind == transport.AcquireFenced && !r.OK {
			one(c, transport.Op{Kind: transport.RaiseFence, Key: op.Key, Value: m.FenceOwner(op.Key) + "+", Token: m.Fence(op.Key) + 1})
		}
		return r
	})},
	{"denied fenced acquire reports a token", "fenced", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		r := one(c, op)
		if op.Kind == transport.AcquireFenced && !r.OK {
			r.Token = m.Fence(op.Key)
		}
		return r
	})},
	{"sound fake fences", "", fakeFences(fakeFence{raise: raiseSound})},
	{"raise fence lowers", "fenced", fakeFences(fakeFence{raise: func(cur fakeCounter, op transport.Op) (fakeCounter, bool) {
		return fakeCounter{n: op.Token, owner: op.Value}, true
	}})},
	{"raise fence ignored", "fenced", fakeFences(fakeFence{raise: func(cur fakeCounter, op transport.Op) (fakeCounter, bool) { return cur, true }})},
	{"fence counter expires with the lock", "fenced", fakeFences(fakeFence{raise: raiseSound, expireWithLock: true})},
	// The rule before issue 9: "raise to at least the token", confirmed
	// whenever the count is then at least the token. It lets lock 2 confirm
	// a token older than lock 1's.
	{"raise fence confirms any count at least the token", "fence_overlap", fakeFences(fakeFence{raise: func(cur fakeCounter, op transport.Op) (fakeCounter, bool) {
		if cur.n < op.Token {
			return fakeCounter{n: op.Token, owner: op.Value}, true
		}
		return cur, true
	}})},
	{"raise fence ignores the owner of an equal count", "fenced", fakeFences(fakeFence{raise: func(cur fakeCounter, op transport.Op) (fakeCounter, bool) {
		if cur.n < op.Token {
			return fakeCounter{n: op.Token, owner: op.Value}, true
		}
		return cur, cur.n == op.Token
	}})},
	{"raise fence refused takes ownership", "fenced", fakeFences(fakeFence{raise: func(cur fakeCounter, op transport.Op) (fakeCounter, bool) {
		next, ok := raiseSound(cur, op)
		if !ok && cur.n == op.Token {
			next.owner = op.Value
		}
		return next, ok
	}})},
	{"fenced acquire does not take ownership", "fenced", fakeFences(fakeFence{raise: raiseSound, acquireKeepsOwner: true})},

	// Multi-key ops, each built from single-key ones the way a transport
	// without one atomic step might.
	{"multi acquire sets the free keys", "multi", perMulti(transport.Acquire, func(c transport.Transport, op transport.Op) transport.Result {
		ok := true
		for _, k := range op.Keys {
			ok = one(c, transport.Op{Kind: transport.Acquire, Key: k, Value: op.Value, TTL: op.TTL}).OK && ok
		}
		return transport.Result{OK: ok}
	})},
	{"multi extend re-creates missing keys", "multi", perMulti(transport.Extend, func(c transport.Transport, op transport.Op) transport.Result {
		for _, k := range op.Keys {
			one(c, transport.Op{Kind: transport.Acquire, Key: k, Value: op.Value, TTL: op.TTL})
		}
		return one(c, op)
	})},
	{"multi extend extends the keys it can", "multi", perMulti(transport.Extend, func(c transport.Transport, op transport.Op) transport.Result {
		ok := true
		for _, k := range op.Keys {
			ok = one(c, transport.Op{Kind: transport.Extend, Key: k, Value: op.Value, TTL: op.TTL}).OK && ok
		}
		return transport.Result{OK: ok}
	})},
	{"multi release all or nothing", "multi", perMulti(transport.Release, func(c transport.Transport, op transport.Op) transport.Result {
		// Extend with a long ttl succeeds exactly when every key is ours.
		if !one(c, transport.Op{Kind: transport.Extend, Key: op.Key, Keys: op.Keys, Value: op.Value, TTL: time.Minute}).OK {
			return transport.Result{}
		}
		return one(c, op)
	})},
	{"multi release reports any deletion", "multi", perMulti(transport.Release, func(c transport.Transport, op transport.Op) transport.Result {
		ok := false
		for _, k := range op.Keys {
			ok = one(c, transport.Op{Kind: transport.Release, Key: k, Value: op.Value}).OK || ok
		}
		return transport.Result{OK: ok}
	})},
	{"multi ops on the first key only", "multi", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		op.Keys = nil
		return one(c, op)
	})},

	{"epoch moves without a restart", "optional", func(m *memory.Master, c transport.Transport) transport.Transport {
		return epochPerCall{c}
	}},
	{"immediate, but Do sleeps", "optional/Immediate", func(m *memory.Master, c transport.Transport) transport.Transport {
		// A fault injector's delay forwarded with the memory master's
		// Immediate: the engine would run it on a caller's goroutine.
		return immediate{doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			time.Sleep(time.Millisecond)
			return c.Do(ctx, ops, res)
		}}}
	}},
	{"ctx kept after Do", "ctx_not_kept", func(m *memory.Master, c transport.Transport) transport.Transport {
		return doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			err := c.Do(ctx, ops, res)
			go func() { // work left behind that still watches ctx
				time.Sleep(time.Millisecond) // the mutant's lingering work
				_ = ctx.Err()
			}()
			return err
		}}
	}},
}

// wantSkip names, per sound transport, the subtests the suite must skip.
var wantSkip = map[string][]string{
	"sound":                {"unsupported"},
	"minimal":              {"fenced", "fence_overlap", "multi", "optional/ServerReporter", "optional/Namer", "optional/Immediate"},
	"minimal with fencing": {"multi"},
}

var clients atomic.Int64

func TestSuiteCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite once per mutant in child processes")
	}
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutant$", "-test.v", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), "TRANSPORTTEST_MUTANT="+mu.name)
			out, err := cmd.CombinedOutput()
			switch {
			case mu.wantFail == "" && err != nil:
				t.Fatalf("the suite failed a sound transport: %v\n%s", err, out)
			case mu.wantFail != "" && err == nil:
				t.Fatalf("the suite passed a transport whose %s is broken\n%s", mu.wantFail, out)
			case mu.wantFail != "" && !strings.Contains(string(out), "--- FAIL: TestMutant/"+mu.wantFail):
				t.Fatalf("the suite failed, but not in subtest %s:\n%s", mu.wantFail, out)
			}
			for _, sub := range wantSkip[mu.name] {
				if !strings.Contains(string(out), "--- SKIP: TestMutant/"+sub+" ") {
					t.Errorf("the suite did not skip subtest %s:\n%s", sub, out)
				}
			}
		})
	}
}

// TestMutant runs the suite against the mutant named by the environment; it
// only runs as a child of TestSuiteCatchesMutants.
func TestMutant(t *testing.T) {
	name := os.Getenv("TRANSPORTTEST_MUTANT")
	if name == "" {
		t.Skip("run by TestSuiteCatchesMutants")
	}
	for _, mu := range mutants {
		if mu.name == name {
			m := memory.New()
			transporttest.Run(t, func(t *testing.T) transport.Transport { return mu.wrap(m, m.Transport()) })
			return
		}
	}
	t.Fatalf("no mutant %q", name)
}

// doFunc replaces a client's Do.
type doFunc struct {
	transport.Transport
	do func(ctx context.Context, ops []transport.Op, res []transport.Result) error
}

// Capabilities are the client's, through every wrapper below (embedding
// transport.Transport alone would hide them, and the suite would skip the
// parts a mutant breaks).
func (d doFunc) Capabilities() transport.Capabilities { return transport.CapabilitiesOf(d.Transport) }

func (d doFunc) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	return d.do(ctx, ops, res)
}

// perOp replaces a client's Do by f applied to each valid op in turn.
func perOp(f func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result) func(*memory.Master, transport.Transport) transport.Transport {
	return func(m *memory.Master, c transport.Transport) transport.Transport {
		return doFunc{c, func(ctx context.Context, ops []transport.Op, res []transport.Result) error {
			if err := c.Do(ctx, nil, nil); err != nil { // closed or ctx done
				return transport.Fail(res, err)
			}
			for i, op := range ops {
				if err := transport.Check(&op); err != nil {
					res[i] = transport.Result{Err: err}
					continue
				}
				res[i] = f(m, c, op)
			}
			return nil
		}}
	}
}

// perMulti replaces a client's multi-key ops of kind by f.
func perMulti(kind transport.OpKind, f func(c transport.Transport, op transport.Op) transport.Result) func(*memory.Master, transport.Transport) transport.Transport {
	return perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		if op.Kind == kind && len(op.Keys) > 1 {
			return f(c, op)
		}
		return one(c, op)
	})
}

// fakeFence is a fencing counter kept beside the memory master: raise gives
// the counter RaiseFence leaves and its OK (raiseSound is right),
// expireWithLock makes a counter vanish when the lock it was last counted
// for expires, and acquireKeepsOwner keeps the owner through AcquireFenced.
type fakeFence struct {
	raise             func(cur fakeCounter, op transport.Op) (fakeCounter, bool)
	expireWithLock    bool
	acquireKeepsOwner bool
}

type fakeCounter struct {
	n       int64
	owner   string
	expires time.Time // zero: never
}

// raiseSound is the contract's RaiseFence.
func raiseSound(cur fakeCounter, op transport.Op) (fakeCounter, bool) {
	switch {
	case cur.n < op.Token:
		return fakeCounter{n: op.Token, owner: op.Value}, true
	case cur.n == op.Token && cur.owner == op.Value:
		return cur, true
	}
	return cur, false
}

// fakeFences runs fenced ops as plain ones on the master and keeps the
// counters itself; one per child process, so one per master.
func fakeFences(ff fakeFence) func(*memory.Master, transport.Transport) transport.Transport {
	var (
		mu       sync.Mutex
		counters = map[string]fakeCounter{}
	)
	get := func(k string) fakeCounter {
		ct := counters[k]
		if !ct.expires.IsZero() && time.Now().After(ct.expires) {
			return fakeCounter{}
		}
		return ct
	}
	return perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
		mu.Lock()
		defer mu.Unlock()
		switch op.Kind {
		case transport.AcquireFenced:
			op.Kind = transport.Acquire
			r := one(c, op)
			if r.OK {
				prev := get(op.Key)
				ct := fakeCounter{n: prev.n + 1, owner: op.Value}
				if ff.acquireKeepsOwner {
					ct.owner = prev.owner
				}
				if ff.expireWithLock {
					ct.expires = time.Now().Add(op.TTL)
				}
				counters[op.Key] = ct
				r.Token = ct.n
			}
			return r
		case transport.RaiseFence:
			next, ok := ff.raise(get(op.Key), op)
			counters[op.Key] = next
			return transport.Result{OK: ok}
		}
		return one(c, op)
	})
}

func one(c transport.Transport, op transport.Op) transport.Result {
	res := make([]transport.Result, 1)
	_ = c.Do(context.Background(), []transport.Op{op}, res)
	return res[0]
}

// minimal is a transport of the three required ops over a memory client:
// it implements the ops of have (none by default: declare them with
// declared), answers every other op with transport.CheckFor's error, and
// has none of the client's optional interfaces.
// apply, when set, rewrites an op the transport lacks and says whether to
// send it anyway (a broken transport).
type minimal struct {
	c     transport.Transport
	have  transport.Capabilities
	apply func(op *transport.Op) bool
}

func (m minimal) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	var (
		send []transport.Op
		at   []int // send[j] is ops[at[j]]
	)
	for i := range ops {
		op := ops[i]
		if err := transport.CheckFor(&op, m.have); err != nil {
			if m.apply == nil || errors.Is(err, transport.ErrInvalidOp) || !m.apply(&op) {
				res[i] = transport.Result{Err: err}
				continue
			}
		}
		send, at = append(send, op), append(at, i)
	}
	sent := make([]transport.Result, len(send))
	if err := m.c.Do(ctx, send, sent); err != nil {
		return transport.Fail(res, err)
	}
	for j, i := range at {
		res[i] = sent[j]
	}
	return nil
}

func (m minimal) Close() error { return m.c.Close() }

// declared declares capabilities its transport does not have.
type declared struct {
	transport.Transport
	caps transport.Capabilities
}

func (d declared) Capabilities() transport.Capabilities { return d.caps }

type noClose struct{ transport.Transport }

func (noClose) Close() error { return nil }

func (n noClose) Capabilities() transport.Capabilities { return transport.CapabilitiesOf(n.Transport) }

type runIDPerClient struct {
	transport.Transport
	id string
}

func (r runIDPerClient) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(r.Transport)
}

func (r runIDPerClient) ServerInfo(context.Context) (transport.ServerInfo, error) {
	return transport.ServerInfo{RunID: r.id}, nil
}

func (r runIDPerClient) Epoch() uint64 { return r.Transport.(transport.ServerReporter).Epoch() }

// immediate says the transport's Do never waits (transport.Immediate).
type immediate struct{ doFunc }

func (immediate) Immediate() bool { return true }

// epochPerCall is a ServerReporter whose epoch moves on every read.
type epochPerCall struct{ transport.Transport }

var epochs atomic.Uint64

func (epochPerCall) Epoch() uint64 { return epochs.Add(1) }

func (e epochPerCall) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	return e.Transport.(transport.ServerReporter).ServerInfo(ctx)
}

func (e epochPerCall) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(e.Transport)
}
