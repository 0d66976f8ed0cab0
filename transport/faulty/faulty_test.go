package faulty

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/transporttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// With every fault off the wrapper is transparent.
func TestConformance(t *testing.T) {
	m := memory.NewNamed("m")
	var seed uint64
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		seed++
		return Wrap(m.Transport(), Config{Seed: seed})
	})
}

// Also its View, which the engine would see for a transport lacking some
// optional interfaces.
func TestConformanceView(t *testing.T) {
	m := memory.NewNamed("m")
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		return Wrap(m.Transport(), Config{}).View()
	})
}

func acq(key, value string) transport.Op {
	return transport.Op{Kind: transport.Acquire, Key: key, Value: value, TTL: 10 * time.Second}
}

func rel(key, value string) transport.Op {
	return transport.Op{Kind: transport.Release, Key: key, Value: value}
}

func do(tr transport.Transport, timeout time.Duration, ops ...transport.Op) ([]transport.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res := make([]transport.Result, len(ops))
	err := tr.Do(ctx, ops, res)
	return res, err
}

func newWrapped(t *testing.T, cfg Config) (*memory.Master, *Transport) {
	t.Helper()
	m := memory.NewNamed("m")
	w := Wrap(m.Transport(), cfg)
	t.Cleanup(func() { w.Close() })
	return m, w
}

// In a synctest bubble, so that "no added latency" is exact, not a bound a
// loaded machine can break.
func TestLatency(t *testing.T) {
	synctest.Test(t, testLatency)
}

func testLatency(t *testing.T) {
	m, w := newWrapped(t, Config{Latency: 30 * time.Millisecond, Jitter: 10 * time.Millisecond})
	start := time.Now()
	if res, err := do(w, time.Second, acq("k", "v")); err != nil || !res[0].OK {
		t.Fatalf("acquire: %v %+v", err, res)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("took %v with 30ms added latency", took)
	}
	// A caller that gives up during the wait: error, nothing applied.
	res, err := do(w, 5*time.Millisecond, acq("late", "v"))
	if err == nil || !errors.Is(res[0].Err, context.DeadlineExceeded) {
		t.Fatalf("acquire with a deadline inside the latency: %v %+v", err, res)
	}
	if _, ok := m.Get("late"); ok {
		t.Fatal("a batch whose caller gave up during the latency was applied")
	}
	w.SetLatency(0, 0)
	start = time.Now()
	do(w, time.Second, rel("k", "v"))
	if took := time.Since(start); took != 0 {
		t.Fatalf("took %v after SetLatency(0, 0)", took)
	}
	if s := w.Stats(); s.Delayed != 2 || s.Batches != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// A dropped reply is the dangerous case: applied, reported as a failure.
func TestDroppedReplies(t *testing.T) {
	m, w := newWrapped(t, Config{DropRate: 1})
	res, err := do(w, time.Second, acq("k", "v"), acq("k2", "v"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.OK || !errors.Is(r.Err, ErrReplyLost) {
			t.Fatalf("op %d: %+v, want ErrReplyLost", i, r)
		}
	}
	if v, ok := m.Get("k"); !ok || v != "v" {
		t.Fatal("the op whose reply was lost was not applied")
	}
	w.SetDropRate(0)
	w.DropReplies(50 * time.Millisecond)
	res, _ = do(w, time.Second, rel("k", "v"))
	if !errors.Is(res[0].Err, ErrReplyLost) {
		t.Fatalf("during DropReplies: %+v", res[0])
	}
	if _, ok := m.Get("k"); ok {
		t.Fatal("release during DropReplies was not applied")
	}
	// A malformed op keeps its own error.
	res, _ = do(w, time.Second, transport.Op{Kind: transport.Acquire, Key: "x", Value: "v"})
	if !errors.Is(res[0].Err, transport.ErrInvalidOp) {
		t.Fatalf("invalid op: %+v, want ErrInvalidOp", res[0])
	}
	w.Heal()
	res, _ = do(w, time.Second, acq("k", "w"))
	if res[0].Err != nil || !res[0].OK {
		t.Fatalf("after Heal: %+v", res[0])
	}
	if s := w.Stats(); s.Dropped != 3 {
		t.Fatalf("stats %+v, want 3 dropped", s)
	}
}

// In a synctest bubble: "fails fast" means no time passes at all, and the
// partition's end is the fake clock's, not a loaded machine's.
func TestPartition(t *testing.T) {
	synctest.Test(t, testPartition)
}

func testPartition(t *testing.T) {
	m, w := newWrapped(t, Config{})
	w.Partition(80 * time.Millisecond)
	start := time.Now()
	res, err := do(w, time.Second, acq("k", "v"))
	if !errors.Is(err, transport.ErrUnavailable) || !errors.Is(res[0].Err, transport.ErrUnavailable) {
		t.Fatalf("partitioned: %v %+v, want ErrUnavailable", err, res)
	}
	if d := time.Since(start); d != 0 {
		t.Fatalf("a partitioned Do waited %v instead of failing at once", d)
	}
	if _, ok := m.Get("k"); ok {
		t.Fatal("applied during a partition")
	}
	if _, err := w.ServerInfo(context.Background()); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("ServerInfo partitioned: %v", err)
	}
	time.Sleep(80 * time.Millisecond) // fake time: the partition is over
	if res, err := do(w, time.Second, acq("k", "v")); err != nil || !res[0].OK {
		t.Fatalf("after the partition: %v %+v", err, res)
	}
	w.Partition(time.Hour)
	w.Heal()
	if _, err := w.ServerInfo(context.Background()); err != nil {
		t.Fatalf("ServerInfo after Heal: %v", err)
	}
	if s := w.Stats(); s.Partitioned != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFailRate(t *testing.T) {
	m, w := newWrapped(t, Config{Seed: 7, FailRate: 0.5})
	failed := 0
	for i := range 200 {
		k := string(rune('a' + i%26))
		res, err := do(w, time.Second, acq(k+"x", "v"), rel(k+"x", "v"))
		if err != nil {
			failed++
			if !errors.Is(res[0].Err, transport.ErrUnavailable) {
				t.Fatalf("failed batch: %+v", res)
			}
		}
	}
	if failed < 60 || failed > 140 {
		t.Fatalf("%d of 200 batches failed at rate 0.5", failed)
	}
	if m.Len() != 0 {
		t.Fatal("a failed batch was half applied")
	}
}

// The same seed and the same calls give the same faults.
func TestDeterministic(t *testing.T) {
	run := func(seed uint64) []bool {
		m := memory.New()
		w := Wrap(m.Transport(), Config{Seed: seed, DropRate: 0.3, FailRate: 0.2, Jitter: time.Microsecond})
		defer w.Close()
		var trace []bool
		for range 100 {
			res, err := do(w, time.Second, acq("k", "v"), rel("k", "v"))
			trace = append(trace, err != nil, res[0].Err != nil, res[1].Err != nil)
		}
		return trace
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different faults")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same faults")
	}
}

// A pause holds Do; a caller that gives up gets an error, but the batch is
// still applied on Resume, before anything sent after it: a release sent
// after a timed-out acquire cannot overtake it.
func TestPauseKeepsOrder(t *testing.T) {
	synctest.Test(t, testPauseKeepsOrder)
}

func testPauseKeepsOrder(t *testing.T) {
	m, w := newWrapped(t, Config{})
	w.Pause()
	if !w.Paused() {
		t.Fatal("Paused() = false")
	}
	res, err := do(w, 30*time.Millisecond, acq("k", "v"))
	if err == nil || !errors.Is(res[0].Err, context.DeadlineExceeded) {
		t.Fatalf("acquire on a paused master: %v %+v, want a timeout", err, res)
	}
	if _, ok := m.Get("k"); ok {
		t.Fatal("applied while paused")
	}
	// The engine cleans up: the release is queued behind the acquire.
	var wg sync.WaitGroup
	var relRes []transport.Result
	wg.Go(func() { relRes, _ = do(w, 2*time.Second, rel("k", "v")) })
	synctest.Wait() // the release is held behind the acquire
	w.Resume()
	wg.Wait()
	if relRes[0].Err != nil || !relRes[0].OK {
		t.Fatalf("release after resume: %+v, want OK (the held acquire went first)", relRes[0])
	}
	if _, ok := m.Get("k"); ok {
		t.Fatal("key left behind: the release overtook the acquire")
	}
	if s := w.Stats(); s.Held != 2 || s.Abandoned != 1 {
		t.Fatalf("stats %+v", s)
	}
	// ServerInfo waits for the pause too.
	w.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := w.ServerInfo(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ServerInfo paused: %v", err)
	}
	w.Resume()
	if _, err := w.ServerInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCloseWhilePaused(t *testing.T) {
	synctest.Test(t, testCloseWhilePaused)
}

func testCloseWhilePaused(t *testing.T) {
	m := memory.New()
	w := Wrap(m.Transport(), Config{})
	w.Pause()
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { _, err = do(w, 5*time.Second, acq("k", "v")) })
	synctest.Wait() // the acquire is held by the pause
	if cerr := w.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	wg.Wait()
	if !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("held Do after Close: %v", err)
	}
	if _, ok := m.Get("k"); ok {
		t.Fatal("a held batch was applied after Close")
	}
	if _, err := do(w, time.Second, acq("k", "v")); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestOptionalInterfaces(t *testing.T) {
	m := memory.NewNamed("m1")
	w := Wrap(m.Transport(), Config{})
	defer w.Close()
	if w.Name() != "m1" || w.Epoch() != m.Transport().(transport.ServerReporter).Epoch() {
		t.Fatalf("Name %q Epoch %d not delegated", w.Name(), w.Epoch())
	}
	before := w.Epoch()
	m.Restart()
	if w.Epoch() == before {
		t.Fatal("Epoch not delegated live")
	}
	info, err := w.ServerInfo(context.Background())
	if err != nil || info.RunID == "" {
		t.Fatalf("ServerInfo: %+v %v", info, err)
	}
	full := transport.Fencing | transport.MultiKey | transport.Shared
	if got := w.Capabilities(); got != full {
		t.Errorf("Capabilities of a wrapped memory transport = %v, want %v", got, full)
	}
	v := w.View()
	if got := transport.CapabilitiesOf(v); got != full {
		t.Errorf("Capabilities of the View of a memory transport = %v, want %v", got, full)
	}
	if !is[transport.ServerReporter](v) || !is[transport.Namer](v) {
		t.Error("View of a memory transport lacks ServerReporter or Namer")
	}

	// A bare transport: the View has none of them, the wrapper answers
	// sensibly.
	bare := Wrap(bareTransport{m.Transport()}, Config{})
	defer bare.Close()
	bv := bare.View()
	if is[transport.ServerReporter](bv) || is[transport.Namer](bv) {
		t.Error("View of a bare transport has optional interfaces")
	}
	if got := transport.CapabilitiesOf(bv); got != 0 {
		t.Errorf("Capabilities of the View of a bare transport = %v, want none", got)
	}
	if _, err := bare.ServerInfo(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ServerInfo of a bare transport: %v", err)
	}
	if bare.Epoch() != 0 || bare.Name() != "faulty" {
		t.Error("bare fallbacks")
	}
	// The combinations in between.
	for _, tc := range []struct {
		inner func(full transport.Transport) transport.Transport
		mask  int
	}{
		{func(f transport.Transport) transport.Transport {
			return reporterOnly{bareTransport{f}, f.(transport.ServerReporter)}
		}, 1},
		{func(f transport.Transport) transport.Transport {
			return nameOnly{bareTransport{f}, f.(transport.Namer)}
		}, 2},
		{func(f transport.Transport) transport.Transport { return f }, 3},
	} {
		w := Wrap(tc.inner(m.Transport()), Config{})
		v := w.View()
		got := 0
		for bit, ok := range []bool{is[transport.ServerReporter](v), is[transport.Namer](v)} {
			if ok {
				got |= 1 << bit
			}
		}
		if got != tc.mask {
			t.Errorf("View of a transport with interfaces %02b has %02b", tc.mask, got)
		}
		if res, err := do(v, time.Second, acq("combo", "v"), rel("combo", "v")); err != nil || !res[0].OK || !res[1].OK {
			t.Errorf("mask %02b: Do through the View: %v %+v", tc.mask, err, res)
		}
		w.Close()
	}
}

func is[I any](v any) bool {
	_, ok := v.(I)
	return ok
}

type bareTransport struct{ t transport.Transport }

func (b bareTransport) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	return b.t.Do(ctx, ops, res)
}
func (b bareTransport) Close() error { return b.t.Close() }

type reporterOnly struct {
	bareTransport
	transport.ServerReporter
}

type nameOnly struct {
	bareTransport
	transport.Namer
}

// recorder passes batches to a memory master and keeps the ops it saw.
type recorder struct {
	inner transport.Transport
	mu    sync.Mutex
	ops   []transport.Op
}

func (r *recorder) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	r.mu.Lock()
	r.ops = append(r.ops, ops...)
	r.mu.Unlock()
	return r.inner.Do(ctx, ops, res)
}
func (r *recorder) Close() error { return r.inner.Close() }

func (r *recorder) seen() []transport.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

func TestLoseFences(t *testing.T) {
	m := memory.NewNamed("m")
	rec := &recorder{inner: m.Transport()}
	w := Wrap(rec, Config{})
	defer w.Close()
	fence := func(tok int64) transport.Op {
		return transport.Op{Kind: transport.RaiseFence, Key: "k", Value: "v", Token: tok}
	}
	fenced := transport.Op{Kind: transport.AcquireFenced, Key: "k", Value: "v", TTL: time.Second}
	w.LoseFences(time.Hour)
	res, err := do(w, time.Second, fenced, fence(7), rel("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK || res[0].Token != 1 {
		t.Errorf("acquire-fenced %+v, want OK with token 1", res[0])
	}
	if !errors.Is(res[1].Err, ErrFenceLost) || res[1].OK {
		t.Errorf("raise-fence %+v, want ErrFenceLost", res[1])
	}
	if !res[2].OK {
		t.Errorf("release after the lost raise %+v, want OK (sent, in order)", res[2])
	}
	if got := m.Fence("k"); got != 1 {
		t.Errorf("counter %d after a lost raise to 7, want 1 (not applied)", got)
	}
	for _, op := range rec.seen() {
		if op.Kind == transport.RaiseFence {
			t.Errorf("a lost raise reached the master: %+v", op)
		}
	}
	// A batch of lost raises only: nothing reaches the master.
	n := len(rec.seen())
	if res, _ := do(w, time.Second, fence(9)); !errors.Is(res[0].Err, ErrFenceLost) {
		t.Errorf("lone raise %+v, want ErrFenceLost", res[0])
	}
	if len(rec.seen()) != n {
		t.Errorf("a batch of lost raises sent %d ops", len(rec.seen())-n)
	}
	if s := w.Stats(); s.FencesLost != 2 {
		t.Errorf("Stats.FencesLost = %d, want 2", s.FencesLost)
	}
	w.Heal()
	if res, _ := do(w, time.Second, fence(7)); !res[0].OK || res[0].Err != nil {
		t.Errorf("raise after Heal %+v, want OK", res[0])
	}
	if got := m.Fence("k"); got != 7 {
		t.Errorf("counter %d after a healed raise to 7", got)
	}
}

func TestClockRate(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		rate float64
		want time.Duration
	}{
		{time.Second, 0, time.Second},
		{time.Second, 1, time.Second},
		{time.Second, 1.3, 769 * time.Millisecond},
		{time.Second, 1.005, 995 * time.Millisecond},
		{time.Second, 0.5, 2 * time.Second},
		{time.Millisecond, 3, time.Millisecond}, // never below 1ms
	} {
		if got := ScaleTTL(tc.ttl, tc.rate); got != tc.want {
			t.Errorf("ScaleTTL(%v, %v) = %v, want %v", tc.ttl, tc.rate, got, tc.want)
		}
	}
	rec := &recorder{inner: memory.NewNamed("m").Transport()}
	w := Wrap(rec, Config{})
	defer w.Close()
	w.SetClockRate(1.3)
	ext := transport.Op{Kind: transport.Extend, Key: "k", Value: "v", TTL: time.Second}
	fenced := transport.Op{Kind: transport.AcquireFenced, Key: "f", Value: "v", TTL: time.Second}
	a := acq("k", "v")
	a.TTL = time.Second
	res, err := do(w, time.Second, a, ext, fenced, rel("k", "v"))
	if err != nil || !res[0].OK || !res[1].OK || !res[2].OK || !res[3].OK {
		t.Fatalf("batch %+v, %v", res, err)
	}
	seen := rec.seen()
	for i, want := range []time.Duration{769 * time.Millisecond, 769 * time.Millisecond, 769 * time.Millisecond, 0} {
		if seen[i].TTL != want {
			t.Errorf("%s reached the master with ttl %v, want %v", seen[i].Kind, seen[i].TTL, want)
		}
	}
	if s := w.Stats(); s.Scaled != 3 {
		t.Errorf("Stats.Scaled = %d, want 3", s.Scaled)
	}
	w.SetClockRate(1)
	if _, err := do(w, time.Second, ext); err != nil {
		t.Fatal(err)
	}
	if got := rec.seen()[4].TTL; got != time.Second {
		t.Errorf("ttl %v after the clock keeps time again", got)
	}
}
