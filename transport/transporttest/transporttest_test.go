package transporttest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
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
		time.Sleep(time.Millisecond) // widen the race window
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

func one(c transport.Transport, op transport.Op) transport.Result {
	res := make([]transport.Result, 1)
	_ = c.Do(context.Background(), []transport.Op{op}, res)
	return res[0]
}

type noClose struct{ transport.Transport }

func (noClose) Close() error { return nil }

type runIDPerClient struct {
	transport.Transport
	id string
}

func (r runIDPerClient) ServerInfo(context.Context) (transport.ServerInfo, error) {
	return transport.ServerInfo{RunID: r.id}, nil
}
