package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/redis"
)

// telemetry is an SDK meter provider with a manual reader and a tracer
// provider with an in-memory exporter, for an engine under test.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
	opts   []api.Option
}

func newTelemetry(t *testing.T) *telemetry {
	tm := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tm.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tm.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	tm.opts = []api.Option{api.WithMeterProvider(mp), api.WithTracerProvider(tp)}
	return tm
}

// point is one data point: its attributes, and its value (a sum or gauge)
// or its count and sum (a histogram).
type point struct {
	attrs attribute.Set
	value float64
	count uint64
}

func (tm *telemetry) collect(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := make(map[string][]point)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var ps []point
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: p.Value})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: p.Value})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: float64(p.Sum), count: p.Count})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: p.Sum, count: p.Count})
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = ps
		}
	}
	return out
}

// sel sums the points of name whose attributes include every kv pair
// ("key=value"): the value (sums, gauges) or the count (histograms), and
// the histograms' sum.
func sel(ms map[string][]point, name string, kv ...string) (value float64, count uint64) {
	for _, p := range ms[name] {
		ok := true
		for _, s := range kv {
			k, v, _ := strings.Cut(s, "=")
			got, has := p.attrs.Value(attribute.Key(k))
			if !has || got.Emit() != v {
				ok = false
				break
			}
		}
		if ok {
			value += p.value
			count += p.count
		}
	}
	return value, count
}

func wantValue(t *testing.T, ms map[string][]point, want float64, name string, kv ...string) {
	t.Helper()
	if _, ok := ms[name]; !ok {
		t.Errorf("%s: no such metric", name)
		return
	}
	if got, _ := sel(ms, name, kv...); got != want {
		t.Errorf("%s%v = %v, want %v", name, kv, got, want)
	}
}

func wantCount(t *testing.T, ms map[string][]point, want uint64, name string, kv ...string) {
	t.Helper()
	if _, c := sel(ms, name, kv...); c != want {
		t.Errorf("%s%v: %d recorded, want %d", name, kv, c, want)
	}
}

// TestMetricsAfterKnownOperations runs a known sequence of calls and
// checks every engine-level metric against it.
func TestMetricsAfterKnownOperations(t *testing.T) {
	tm := newTelemetry(t)
	masters := []*memory.Master{memory.NewNamed("m1"), memory.NewNamed("m2"), memory.NewNamed("m3")}
	ts := []transport.Transport{masters[0].Transport(), masters[1].Transport(), masters[2].Transport()}
	e, err := engine.NewWithTransports(ts, append(tm.opts, api.WithoutRestartQuarantine())...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()

	// 1. Lock a (acquired), extend it (ok), unlock it (released).
	a, err := e.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	ms := tm.collect(t)
	wantValue(t, ms, 1, "redlock.lock.held")
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// 2. Lock b, then TryLock b (taken, one attempt) and Lock b with two
	// attempts (taken).
	b, err := e.Lock(ctx, "b", api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryLock(ctx, "b"); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	if _, err := e.Lock(ctx, "b", api.WithMaxAttempts(2)); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("Lock of a held key: %v", err)
	}
	// 3. Invalid and cancelled calls.
	if _, err := e.Lock(ctx, ""); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.LockAll(cctx, []string{"x", "y"}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	// 4. A lock that expires while watched.
	short, err := e.TryLockAll(ctx, []string{"s1", "s2"}, api.WithTTL(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()
	// 5. A lock whose extension fails: two of three masters forget it.
	c, err := e.Lock(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	// Lock returned on a quorum; the third SET may still be on its way,
	// and must land before the restarts, not after.
	pollMetrics(t, func() bool {
		for _, m := range masters {
			if v, ok := m.Get("c"); !ok || v != c.Value() {
				return false
			}
		}
		return true
	})
	masters[0].Restart()
	masters[1].Restart()
	if err := c.Extend(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Extend after two masters forgot the lock: %v", err)
	}
	if !errors.Is(c.Err(), api.ErrNotHeld) {
		t.Fatalf("Err after a failed extension: %v", c.Err())
	}

	ms = tm.collect(t)
	const acq = "redlock.lock.acquire.duration"
	wantCount(t, ms, 1, acq, "redlock.call=lock", "redlock.fenced=true", "redlock.outcome=acquired")
	wantCount(t, ms, 1, acq, "redlock.call=trylock", "redlock.outcome=taken")
	wantCount(t, ms, 1, acq, "redlock.call=lock", "redlock.outcome=taken")
	wantCount(t, ms, 1, acq, "redlock.call=lock", "redlock.outcome=invalid")
	wantCount(t, ms, 1, acq, "redlock.call=lockall", "redlock.outcome=canceled")
	wantCount(t, ms, 1, acq, "redlock.call=trylockall", "redlock.outcome=acquired")
	wantCount(t, ms, 2, acq, "redlock.call=lock", "redlock.fenced=false", "redlock.outcome=acquired") // a and c
	wantCount(t, ms, 8, acq)

	const att = "redlock.lock.acquire.attempts"
	wantValue(t, ms, 1, att, "redlock.call=trylock", "redlock.outcome=taken")
	wantValue(t, ms, 2, att, "redlock.call=lock", "redlock.outcome=taken")
	wantValue(t, ms, 4, att, "redlock.outcome=acquired")
	wantCount(t, ms, 6, att) // invalid and cancelled calls never reached the masters

	// b is still held; a was released, s expired, c lost its extension.
	wantValue(t, ms, 1, "redlock.lock.held")
	wantCount(t, ms, 1, "redlock.lock.hold.duration", "redlock.end=released")
	wantCount(t, ms, 1, "redlock.lock.hold.duration", "redlock.end=expired")
	wantCount(t, ms, 1, "redlock.lock.hold.duration", "redlock.end=extension_failed")
	wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=expired")
	wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=extension_failed")
	wantValue(t, ms, 0, "redlock.lock.lost", "redlock.cause=closed")
	wantValue(t, ms, 1, "redlock.lock.extensions", "redlock.outcome=ok", "redlock.auto=false")
	wantValue(t, ms, 1, "redlock.lock.extensions", "redlock.outcome=not_held", "redlock.auto=false")

	// Closing the engine loses b.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.Err(), api.ErrClosed) {
		t.Fatalf("b after Close: %v", b.Err())
	}
	ms = tm.collect(t)
	wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=closed")
	wantCount(t, ms, 1, "redlock.lock.hold.duration", "redlock.end=closed")
	// A closed engine is no longer observed: its gauges are gone.
	if _, ok := ms["redlock.lock.held"]; ok {
		t.Error("redlock.lock.held still observed after Close")
	}
}

// TestAutoExtensionsCounted checks that automatic extensions are counted
// apart from the caller's.
func TestAutoExtensionsCounted(t *testing.T) {
	tm := newTelemetry(t)
	e := newMemory(t, 3, tm.opts...)
	l, err := e.Lock(context.Background(), "k", api.WithTTL(60*time.Millisecond), api.WithAutoExtend(0.3), api.WithMaxExtensions(2))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done() // two extensions, then it runs out
	ms := tm.collect(t)
	wantValue(t, ms, 2, "redlock.lock.extensions", "redlock.outcome=ok", "redlock.auto=true")
	wantValue(t, ms, 1, "redlock.lock.lost", "redlock.cause=expired")
}

// holdGate is a transport that holds every batch until opened, or fails it.
type holdGate struct {
	transport.Transport
	mu   sync.Mutex
	open chan struct{}
	fail bool
	in   chan struct{} // a batch arrived
}

func newGate(t transport.Transport) *holdGate {
	return &holdGate{Transport: t, open: make(chan struct{}), in: make(chan struct{}, 100)}
}

func (g *holdGate) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	g.mu.Lock()
	open, fail := g.open, g.fail
	g.mu.Unlock()
	g.in <- struct{}{}
	<-open
	if fail {
		transport.Fail(res, errors.New("holdGate: down"))
		return nil
	}
	return g.Transport.Do(ctx, ops, res)
}

func (g *holdGate) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g *holdGate) Name() string { return g.Transport.(transport.Namer).Name() }

func (g *holdGate) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(g.Transport)
}

// TestMasterMetrics checks the per-master metrics: ops by kind and result,
// batches, ops queued and in flight, reachability, and the local line.
func TestMasterMetrics(t *testing.T) {
	tm := newTelemetry(t)
	gates := []*holdGate{newGate(memory.NewNamed("m1").Transport()), newGate(memory.NewNamed("m2").Transport()), newGate(memory.NewNamed("m3").Transport())}
	ts := []transport.Transport{gates[0], gates[1], gates[2]}
	e, err := engine.NewWithTransports(ts, append(tm.opts, api.WithoutRestartQuarantine(), api.WithBatching(512, 1), api.WithMasterTimeout(10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()

	// One Lock's SET is out at every master; a second key's waits behind
	// it (one batch in flight), and a third call on the first key waits in
	// the local line.
	type res struct {
		l   api.Lock
		err error
	}
	first, second, third := make(chan res, 1), make(chan res, 1), make(chan res, 1)
	go func() { l, err := e.Lock(ctx, "a"); first <- res{l, err} }()
	for _, g := range gates {
		<-g.in
	}
	go func() { l, err := e.Lock(ctx, "b"); second <- res{l, err} }()
	go func() { l, err := e.Lock(ctx, "a"); third <- res{l, err} }()
	pollMetrics(t, func() bool {
		ms := tm.collect(t)
		q, _ := sel(ms, "redlock.master.ops.queued")
		w, _ := sel(ms, "redlock.lock.waiters")
		return q == 3 && w == 1
	})
	ms := tm.collect(t)
	for _, m := range []string{"m1", "m2", "m3"} {
		wantValue(t, ms, 1, "redlock.master.ops.inflight", "redlock.master="+m)
		wantValue(t, ms, 1, "redlock.master.ops.queued", "redlock.master="+m)
	}
	for _, g := range gates {
		g.release()
	}
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r2 := <-second; r2.err != nil {
		t.Fatal(r2.err)
	} else if err := r2.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The third call now contends for a (it left the line) and is refused
	// until a is unlocked.
	pollMetrics(t, func() bool { w, _ := sel(tm.collect(t), "redlock.lock.waiters"); return w == 0 })
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r3 := <-third
	if r3.err != nil {
		t.Fatal(r3.err)
	}
	if err := r3.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	ms = tm.collect(t)
	var totalOps float64
	for _, m := range []string{"m1", "m2", "m3"} {
		mm := "redlock.master=" + m
		// Three locks granted and three released on every master; the
		// third call's refusals (and the releases after them) vary with
		// timing, so they are checked for consistency only.
		wantValue(t, ms, 3, "redlock.master.ops", mm, "redlock.op=acquire", "redlock.result=ok")
		wantValue(t, ms, 3, "redlock.master.ops", mm, "redlock.op=release", "redlock.result=ok")
		wantValue(t, ms, 0, "redlock.master.ops", mm, "redlock.result=failed")
		refused, _ := sel(ms, "redlock.master.ops", mm, "redlock.op=acquire", "redlock.result=refused")
		ops, _ := sel(ms, "redlock.master.ops", mm)
		if ops != 6+2*refused {
			t.Errorf("%s: %v ops, want 6 + 2 x %v refused acquires (each followed by a cleanup release)", m, ops, refused)
		}
		size, batches := sel(ms, "redlock.master.batch.size", mm)
		if size != ops || batches == 0 || batches > uint64(ops) {
			t.Errorf("%s: %d batches of %v ops in all, want the %v ops answered", m, batches, size, ops)
		}
		wantCount(t, ms, batches, "redlock.master.batch.duration", mm)
		wantValue(t, ms, 0, "redlock.master.ops.inflight", mm)
		wantValue(t, ms, 0, "redlock.master.ops.queued", mm)
		wantValue(t, ms, 1, "redlock.master.reachable", mm)
		wantValue(t, ms, 1, "redlock.master.voting", mm)
		wantValue(t, ms, 0, "redlock.master.quarantined", mm)
		wantValue(t, ms, 0, "redlock.master.quarantine.remaining", mm)
		totalOps += ops
	}

	// A master whose batches fail is unreachable and its ops failed.
	gates[2].mu.Lock()
	gates[2].fail = true
	gates[2].mu.Unlock()
	l, err := e.Lock(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	// Lock returned on the quorum of m1 and m2; m3's answer may come later.
	pollMetrics(t, func() bool {
		v, _ := sel(tm.collect(t), "redlock.master.ops", "redlock.master=m3", "redlock.result=failed")
		return v > 0
	})
	ms = tm.collect(t)
	wantValue(t, ms, 0, "redlock.master.reachable", "redlock.master=m3")
	wantValue(t, ms, 1, "redlock.master.reachable", "redlock.master=m1")
	wantValue(t, ms, 0, "redlock.master.voting", "redlock.master=m3")
	wantValue(t, ms, 1, "redlock.master.voting", "redlock.master=m1")
	wantValue(t, ms, 1, "redlock.master.ops", "redlock.master=m3", "redlock.op=acquire", "redlock.result=failed")
}

// waitFor polls cond, which reads metrics, until it holds (the metrics are
// observed, not signalled, so there is no event to wait on).
func pollMetrics(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQuarantinedOpsCounted runs a TryLock on fresh in-memory masters
// under a long quarantine: every master's grant turns into a quarantined
// answer, and every master shows in the quarantine gauges.
func TestQuarantinedOpsCounted(t *testing.T) {
	tm := newTelemetry(t)
	e := newMemory(t, 3, append(tm.opts, api.WithRestartQuarantine(time.Hour), api.WithTTL(time.Second))...)
	if _, err := e.TryLock(context.Background(), "k"); !errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatalf("TryLock with every master in quarantine: %v", err)
	}
	// Two quarantined answers decide; the third master's may come after.
	pollMetrics(t, func() bool {
		ms := tm.collect(t)
		for _, m := range e.Masters() {
			if v, _ := sel(ms, "redlock.master.ops", "redlock.master="+m, "redlock.op=acquire", "redlock.result=quarantined"); v < 1 {
				return false
			}
		}
		return true
	})
	ms := tm.collect(t)
	for _, m := range e.Masters() {
		mm := "redlock.master=" + m
		wantValue(t, ms, 1, "redlock.master.ops", mm, "redlock.op=acquire", "redlock.result=quarantined")
		wantValue(t, ms, 1, "redlock.master.quarantined", mm)
		wantValue(t, ms, 1, "redlock.master.reachable", mm)
		if left, _ := sel(ms, "redlock.master.quarantine.remaining", mm); left <= 3500 || left > 3600 {
			t.Errorf("%s votes again in %vs, want just under an hour", m, left)
		}
	}
}

// TestQuarantineGaugeOnRealMasters restarts a redis-server: it shows in the
// quarantine gauge, and leaves it when its quarantine ends.
func TestQuarantineGaugeOnRealMasters(t *testing.T) {
	tm := newTelemetry(t)
	servers := redistest.Start(t, 3)
	ts := make([]transport.Transport, len(servers))
	for i, s := range servers {
		tr, err := redis.New(redis.Config{Addr: s.Addr})
		if err != nil {
			t.Fatal(err)
		}
		ts[i] = tr
	}
	const period = 1500 * time.Millisecond
	e, err := engine.NewWithTransports(ts, append(tm.opts, api.WithRestartQuarantine(period), api.WithTTL(time.Second),
		api.WithRetry(api.Retry{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, Multiplier: 2}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	quarantined := func() (n float64) { n, _ = sel(tm.collect(t), "redlock.master.quarantined"); return n }
	pollMetrics(t, func() bool { return quarantined() == 0 })
	// Fresh servers are up for less than the period: wait them out with a
	// lock (quarantined masters refuse to vote, so it is granted only then).
	l, err := e.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	servers[1].Restart(t)
	name := e.Masters()[1]
	// The node notices the new run id on reconnect, or at its next check.
	if _, err := e.TryLock(context.Background(), "k2"); err != nil && !errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatal(err)
	}
	pollMetrics(t, func() bool {
		v, _ := sel(tm.collect(t), "redlock.master.quarantined", "redlock.master="+name)
		return v == 1
	})
	ms := tm.collect(t)
	wantValue(t, ms, 1, "redlock.master.quarantined")
	if left, _ := sel(ms, "redlock.master.quarantine.remaining", "redlock.master="+name); left <= 0 || left > period.Seconds() {
		t.Errorf("%s votes again in %vs, want in (0, %v]", name, left, period.Seconds())
	}
	pollMetrics(t, func() bool { return quarantined() == 0 })
	wantValue(t, tm.collect(t), 0, "redlock.master.quarantine.remaining", "redlock.master="+name)
}

// TestUnlockOutcomesAndValidityMetered: every Unlock is counted in
// redlock.lock.unlocks by what came of it (released by a majority, not
// held any more, too few masters answered), so that releases that did not
// complete show, under the outcome its span has; and each grant records in
// redlock.lock.validity the validity it had left when Lock returned.
func TestUnlockOutcomesAndValidityMetered(t *testing.T) {
	tm := newTelemetry(t)
	masters := []*memory.Master{memory.NewNamed("m1"), memory.NewNamed("m2"), memory.NewNamed("m3")}
	gates := []*holdGate{newGate(masters[0].Transport()), newGate(masters[1].Transport()), newGate(masters[2].Transport())}
	ts := []transport.Transport{gates[0], gates[1], gates[2]}
	for _, g := range gates {
		g.release() // no holding: only fail matters here
	}
	e, err := engine.NewWithTransports(ts, append(tm.opts, api.WithoutRestartQuarantine(), api.WithTTL(10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()

	// Released, then not held (already released).
	a, err := e.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(a.Until()); left <= 0 || left > 10*time.Second {
		t.Fatalf("a valid for %v more", left)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	// Not held: it expired before the Unlock.
	b, err := e.TryLock(ctx, "b", api.WithTTL(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	// Done fires a drift allowance before the masters' keys expire.
	pollMetrics(t, func() bool {
		for _, m := range masters {
			if _, ok := m.Get("b"); ok {
				return false
			}
		}
		return true
	})
	if err := b.Unlock(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("Unlock of an expired lock: %v, want ErrNotHeld", err)
	}
	// Unreachable: two of three masters fail the release.
	c, err := e.Lock(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gates[:2] {
		g.mu.Lock()
		g.fail = true
		g.mu.Unlock()
	}
	if err := c.Unlock(ctx); !errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatalf("Unlock with two of three masters failing: %v, want ErrQuorumUnreachable", err)
	}

	ms := tm.collect(t)
	const u = "redlock.lock.unlocks"
	wantValue(t, ms, 1, u, "redlock.outcome=ok")
	wantValue(t, ms, 2, u, "redlock.outcome=not_held")
	wantValue(t, ms, 1, u, "redlock.outcome=unreachable")
	wantValue(t, ms, 4, u)
	// One key, one meaning: a dashboard that filters redlock.outcome finds
	// an Unlock under the same value in the metric and in its span.
	spans := 0
	for _, s := range tm.spans.GetSpans() {
		if s.Name != "redlock.Unlock" {
			continue
		}
		spans++
		for _, kv := range s.Attributes {
			if kv.Key == "redlock.outcome" {
				if n, _ := sel(ms, u, "redlock.outcome="+kv.Value.Emit()); n == 0 {
					t.Errorf("an Unlock span's redlock.outcome=%s counts in no series of %s", kv.Value.Emit(), u)
				}
			}
		}
	}
	if spans != 4 {
		t.Errorf("%d redlock.Unlock spans, want 4", spans)
	}

	const v = "redlock.lock.validity"
	wantCount(t, ms, 2, v, "redlock.call=lock")
	wantCount(t, ms, 1, v, "redlock.call=trylock")
	if sum, _ := sel(ms, v, "redlock.call=lock"); sum <= 2*9 || sum > 2*10 {
		t.Errorf("%s: %v s left in all at two grants of a 10s TTL, want just under 20", v, sum)
	}
	if sum, _ := sel(ms, v, "redlock.call=trylock"); sum <= 0 || sum > 0.03 {
		t.Errorf("%s: %v s left at a grant of a 30ms TTL, want in (0, 0.03]", v, sum)
	}
}

// spanSummary is a finished span in a comparable form.
func spanSummary(s tracetest.SpanStub) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s status=%s", s.Name, s.Status.Code)
	if s.Status.Description != "" {
		fmt.Fprintf(&b, "(%s)", s.Status.Description)
	}
	var attrs []string
	for _, kv := range s.Attributes {
		attrs = append(attrs, string(kv.Key)+"="+kv.Value.Emit())
	}
	sort.Strings(attrs)
	fmt.Fprintf(&b, " %s events:", strings.Join(attrs, ","))
	for _, ev := range s.Events {
		m := map[string]string{}
		for _, kv := range ev.Attributes {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		switch ev.Name {
		case "backoff":
			fmt.Fprintf(&b, " backoff#%s", m["redlock.attempt"])
		case "exception":
			b.WriteString(" exception")
		default:
			fmt.Fprintf(&b, " %s#%s(g=%s,r=%s,f=%s,%s)", ev.Name, m["redlock.attempt"], m["redlock.granted"], m["redlock.refused"], m["redlock.failed"], m["redlock.result"])
		}
	}
	return b.String()
}

// TestSpans checks the span of each call: its name, parent, attributes,
// one event per attempt and backoff, and the error class as its status. An
// attempt's event counts the answers it was decided on: two of three for
// a quorum, all three for a release.
func TestSpans(t *testing.T) {
	tm := newTelemetry(t)
	e := newMemory(t, 3, tm.opts...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tm.spans))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")

	l, err := e.Lock(ctx, "secret-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryLock(ctx, "secret-key"); err == nil {
		t.Fatal("TryLock of a held key succeeded")
	}
	if _, err := e.Lock(ctx, "secret-key", api.WithMaxAttempts(2)); err == nil {
		t.Fatal("Lock of a held key succeeded")
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatal(err)
	}
	parent.End()

	got := tm.spans.GetSpans()
	want := []string{
		"redlock.Lock status=Unset redlock.call=lock,redlock.outcome=acquired events: acquire#1(g=2,r=0,f=0,ok)",
		"redlock.TryLock status=Error(taken) redlock.call=trylock,redlock.outcome=taken events: acquire#1(g=0,r=2,f=0,taken) exception",
		"redlock.Lock status=Error(taken) redlock.call=lock,redlock.outcome=taken events: acquire#1(g=0,r=2,f=0,taken) backoff#1 acquire#2(g=0,r=2,f=0,taken) exception",
		"redlock.Extend status=Unset redlock.call=extend,redlock.outcome=ok events: extend#0(g=2,r=0,f=0,ok)",
		"redlock.Unlock status=Unset redlock.call=unlock,redlock.outcome=ok events: release#0(g=3,r=0,f=0,ok)",
		"redlock.Unlock status=Error(not_held) redlock.call=unlock,redlock.outcome=not_held events: exception",
		"parent status=Unset  events:",
	}
	if len(got) != len(want) {
		t.Fatalf("%d spans, want %d", len(got), len(want))
	}
	for i, s := range got {
		if g := spanSummary(s); g != want[i] {
			t.Errorf("span %d:\n got %s\nwant %s", i, g, want[i])
		}
		if i < len(got)-1 && s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %s is not a child of the caller's span", s.Name)
		}
		if s.Status.Code == codes.Error && len(s.Events) == 0 {
			t.Errorf("span %s: an error with no exception event", s.Name)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "secret-key") {
				t.Errorf("span %s carries the key (%s) without WithTraceKeys", s.Name, kv.Key)
			}
		}
	}
}

// TestSpanKeysOptIn checks that WithTraceKeys puts keys on spans.
func TestSpanKeysOptIn(t *testing.T) {
	tm := newTelemetry(t)
	e := newMemory(t, 3, append(tm.opts, api.WithTraceKeys(true))...)
	l, err := e.Lock(context.Background(), "k1")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(context.Background())
	m, err := e.LockAll(context.Background(), []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Unlock(context.Background())
	spans := tm.spans.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	attr := func(s tracetest.SpanStub, k string) string {
		for _, kv := range s.Attributes {
			if string(kv.Key) == k {
				return kv.Value.Emit()
			}
		}
		return ""
	}
	if got := attr(spans[0], "redlock.key"); got != "k1" {
		t.Errorf("Lock span: redlock.key = %q, want k1", got)
	}
	// Compared as a slice: Emit's rendering of a slice changed between
	// SDK versions (v1.47 emits JSON).
	var keys []string
	for _, kv := range spans[2].Attributes {
		if kv.Key == "redlock.keys" {
			keys = kv.Value.AsStringSlice()
		}
	}
	if !slices.Equal(keys, []string{"x", "y"}) {
		t.Errorf("LockAll span: redlock.keys = %q, want [x y]", keys)
	}
	if got := attr(spans[2], "redlock.keys.count"); got != "2" {
		t.Errorf("LockAll span: redlock.keys.count = %q, want 2", got)
	}
}

// TestNilProvidersRefused checks the options' argument checks.
func TestNilProvidersRefused(t *testing.T) {
	if _, err := engine.NewMemory(1, api.WithMeterProvider(nil)); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("WithMeterProvider(nil): %v", err)
	}
	if _, err := engine.NewMemory(1, api.WithTracerProvider(nil)); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("WithTracerProvider(nil): %v", err)
	}
}
