package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/quorumlock/redlock/api"
)

// What BenchmarkHeld measures besides cost, to explain a loss under load
// (BENCHMARKS.md, "Held locks under load"): how late the process's timers
// fire, how late each extension left for the masters after it fell due,
// how long its batches took, and how its extension attempts ended.

// heldMetricsEnv, when set, gives BenchmarkHeld's engine the metrics SDK
// with a manual reader, and the benchmark reports the batches' round trip
// and the extension attempts by outcome. It costs some CPU per extension,
// so the cost figures of such a run are not the plain engine's.
const heldMetricsEnv = "REDLOCK_BENCH_HELD_METRICS"

// timerProbe measures the lateness of this process's timers: a timer every
// probeEvery, each recording how long after its due time its function ran.
// A lock's auto-extension and its expiry run on such timers (time.AfterFunc),
// in the same runtime, so they are as late as these.
type timerProbe struct {
	mu     sync.Mutex
	phase  string
	late   map[string][]time.Duration
	order  []string
	timer  *time.Timer
	due    time.Time
	closed bool
}

const probeEvery = 20 * time.Millisecond

func startTimerProbe(phase string) *timerProbe {
	p := &timerProbe{late: map[string][]time.Duration{}}
	p.mark(phase)
	p.mu.Lock()
	p.due = time.Now().Add(probeEvery)
	p.timer = time.AfterFunc(probeEvery, p.fire)
	p.mu.Unlock()
	return p
}

func (p *timerProbe) fire() {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.late[p.phase] = append(p.late[p.phase], now.Sub(p.due))
	p.due = now.Add(probeEvery)
	p.timer.Reset(probeEvery)
}

// mark starts a new phase: later firings count in it.
func (p *timerProbe) mark(phase string) {
	p.mu.Lock()
	p.phase = phase
	p.order = append(p.order, phase)
	p.mu.Unlock()
}

func (p *timerProbe) stop() {
	p.mu.Lock()
	p.closed = true
	p.timer.Stop()
	p.mu.Unlock()
}

// report logs each phase's lateness and reports the window's and the
// worst phase's.
func (p *timerProbe) report(b *testing.B, window string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	var worst time.Duration
	for _, ph := range p.order {
		d := p.late[ph]
		if len(d) == 0 {
			continue
		}
		q := lagQuantiles(d)
		parts = append(parts, fmt.Sprintf("%s: p50 %v p99 %v max %v (n=%d)", ph, q[0], q[1], q[2], len(d)))
		worst = max(worst, q[2])
		if ph == window {
			b.ReportMetric(q[0].Seconds()*1e3, "timer-late-p50-ms")
			b.ReportMetric(q[1].Seconds()*1e3, "timer-late-p99-ms")
		}
	}
	b.ReportMetric(worst.Seconds()*1e3, "timer-late-max-ms")
	b.Logf("timer lateness by phase: %s", strings.Join(parts, "; "))
}

// lagQuantiles are the p50, p99 and max of d (which it sorts).
func lagQuantiles(d []time.Duration) [3]time.Duration {
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return [3]time.Duration{at(0.5), at(0.99), d[len(d)-1]}
}

// sendLags are, for each lock that extended exactly once in the window, how
// long after its extension fell due the extension's batch left for the
// masters: timer lateness, the coordinator's mailbox and the node queue.
// Read from outside: an extension granted at (start, v) sets Until to
// sent+TTL-drift and the next one due at start+share*v, so with a short
// round trip two successive Untils differ by share*(TTL-drift) plus the
// lag. Each lag is exact to within the extension's round trip times
// (1-share).
func sendLags(u0, u1 []time.Time, locks []api.Lock, period, ttl time.Duration, share float64) []time.Duration {
	drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond // check.Drift at the default factor
	step := time.Duration(share * float64(ttl-drift))
	var out []time.Duration
	for i, l := range locks {
		if l == nil || u0[i].IsZero() || u1[i].IsZero() {
			continue
		}
		d := u1[i].Sub(u0[i])
		if d < period/2 || d > period*3/2 {
			continue // none or several in the window
		}
		out = append(out, d-step)
	}
	return out
}

func reportLags(b *testing.B, lags []time.Duration) {
	if len(lags) == 0 {
		return
	}
	q := lagQuantiles(lags)
	b.ReportMetric(q[0].Seconds()*1e3, "send-lag-p50-ms")
	b.ReportMetric(q[1].Seconds()*1e3, "send-lag-p99-ms")
	b.ReportMetric(q[2].Seconds()*1e3, "send-lag-max-ms")
}

// heldMetrics reads the engine's own metrics, when heldMetricsEnv is set.
type heldMetrics struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newHeldMetrics(b *testing.B) (*heldMetrics, []api.Option) {
	if os.Getenv(heldMetricsEnv) == "" {
		return nil, nil
	}
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &heldMetrics{reader: r, mp: mp}, []api.Option{api.WithMeterProvider(mp)}
}

// heldSnap is what heldMetrics reads at one moment: totals since the start.
type heldSnap struct {
	batches    uint64
	batchSum   float64 // seconds
	batchMax   float64
	ops        int64
	extensions map[string]int64 // auto-extension attempts by outcome
}

func (h *heldMetrics) snap(b *testing.B) heldSnap {
	s := heldSnap{extensions: map[string]int64{}}
	if h == nil {
		return s
	}
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		b.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "redlock.master.batch.duration":
				if d, ok := m.Data.(metricdata.Histogram[float64]); ok {
					for _, p := range d.DataPoints {
						s.batches += p.Count
						s.batchSum += p.Sum
						if v, ok := p.Max.Value(); ok {
							s.batchMax = max(s.batchMax, v)
						}
					}
				}
			case "redlock.master.batch.size":
				if d, ok := m.Data.(metricdata.Histogram[int64]); ok {
					for _, p := range d.DataPoints {
						s.ops += p.Sum
					}
				}
			case "redlock.lock.extensions":
				if d, ok := m.Data.(metricdata.Sum[int64]); ok {
					for _, p := range d.DataPoints {
						o, _ := p.Attributes.Value("redlock.outcome")
						s.extensions[o.AsString()] += p.Value
					}
				}
			}
		}
	}
	return s
}

// report logs what happened between two snapshots (the window) and over
// the whole run (to), and reports the window's mean batch round trip.
func (h *heldMetrics) report(b *testing.B, from, to, end heldSnap) {
	if h == nil {
		return
	}
	if n := to.batches - from.batches; n > 0 {
		b.ReportMetric((to.batchSum-from.batchSum)/float64(n)*1e3, "batch-rtt-ms")
		b.ReportMetric(float64(to.ops-from.ops)/float64(n), "ops/batch")
	}
	b.ReportMetric(end.batchMax*1e3, "batch-rtt-max-ms")
	b.Logf("over the run: %d batches, mean round trip %.1f ms, max %.1f ms; extension attempts by outcome: %v",
		end.batches, end.batchSum/float64(max(1, end.batches))*1e3, end.batchMax*1e3, end.extensions)
}

// heldHogsEnv, when set to N, makes BenchmarkHeld start N CPU hogs (`sh -c
// 'while :; do :; done'`) once the locks are taken and stop them (by pid)
// before it releases them: the load falls on the extensions alone, not on
// the taking, whose own slowness under load would otherwise expire locks
// before their first extension was due.
const heldHogsEnv = "REDLOCK_BENCH_HELD_HOGS"

// startHogs starts heldHogsEnv's hogs and returns what stops them.
func startHogs(b *testing.B) (stop func()) {
	s := os.Getenv(heldHogsEnv)
	if s == "" {
		return func() {}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a number of hogs", heldHogsEnv, s)
	}
	var procs []*exec.Cmd
	stop = func() {
		for _, p := range procs {
			_ = p.Process.Kill()
		}
		for _, p := range procs {
			_ = p.Wait()
		}
		procs = nil
	}
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			stop()
			b.Fatal(err)
		}
		procs = append(procs, c)
	}
	b.Logf("%d CPU hogs started after the take", n)
	return stop
}
