package bench_test

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
)

// heldEnv lists the numbers of locks BenchmarkHeld holds, comma-separated.
const heldEnv = "REDLOCK_BENCH_HELD"

// heldProfileEnv, when set, is a path prefix: BenchmarkHeld writes a CPU
// profile of each window (PREFIX-N.cpu.pprof) and a heap profile taken at
// its start (PREFIX-N.heap.pprof), for go tool pprof.
const heldProfileEnv = "REDLOCK_BENCH_HELD_PROFILE"

// heldCounts is heldEnv's list, or 10k and 100k.
func heldCounts(b *testing.B) []int {
	s := os.Getenv(heldEnv)
	if s == "" {
		return []int{10_000, 100_000}
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want positive numbers, comma-separated", heldEnv, s)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkHeld holds N locks at once on Redis with auto-extension, as a
// job scheduler does, and reports what holding costs the client:
//
//	B/lock       heap per held lock (the engine's handle, timer and
//	             bookkeeping, and the benchmark's key string), after a GC
//	ext/s        the steady auto-extension rate, counted in the window
//	window-s     the window: one whole extension period (half the
//	             validity), starting once every lock has extended once, in
//	             the gap between two rounds of extensions, so each lock
//	             extends about once in it whatever N is
//	cpu-us/ext   the process's CPU in the window over the extensions in
//	             it (holding's other costs, timers and the collector
//	             walking the handles, included), nothing else running
//	core-pct     the process's CPU in the window, in % of one core
//	take-s       seconds to take the N locks (256 lockers)
//	first-ext-s  seconds from the start until every lock had extended once
//	lost         locks whose Done closed before the end (must be 0)
//	untaken      TryLocks that failed (a loaded machine times a few out)
//
// The TTL grows with N so that the extension rate stays near 10k/s and the
// locks are all taken well before the first extension is due; the cost per
// extension does not depend on the rate. It ignores b.N: one run per N (use
// -benchtime 1x). REDLOCK_BENCH_HELD sets the Ns (default 10000,100000;
// bench/scale.sh adds 1000000).
func BenchmarkHeld(b *testing.B) {
	nodes := benchtest.RedisNodes(b)
	for _, n := range heldCounts(b) {
		b.Run("locks="+strconv.Itoa(n), func(b *testing.B) { runHeld(b, nodes, n) })
	}
}

func runHeld(b *testing.B, nodes []string, n int) {
	const (
		share   = 0.5
		lockers = 256
		maxRate = 10_000 // extensions per second the TTL is chosen for
	)
	period := max(10*time.Second, time.Duration(float64(n)/maxRate*float64(time.Second)))
	ttl := time.Duration(float64(period) / share)
	hm, mopts := newHeldMetrics(b)
	e, err := engine.New(nodes, append(mopts, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithAutoExtend(share))...)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	prefix := bench.RunPrefix("held")
	if err := bench.WaitReady(ctx, bench.Engine(e), prefix, 10*time.Second, nil); err != nil {
		b.Fatal(err)
	}

	locks := make([]api.Lock, n)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	start := time.Now()
	probe := startTimerProbe("take")
	defer probe.stop()
	var (
		next   atomic.Int64
		failed atomic.Int64
		first  atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	for range lockers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				l, err := e.TryLock(ctx, prefix+strconv.Itoa(i))
				if err != nil {
					if failed.Add(1) == 1 {
						first.Store(&err)
					}
					continue
				}
				locks[i] = l
			}
		})
	}
	wg.Wait()
	take := time.Since(start)
	probe.mark("first round")
	stopHogs := startHogs(b)
	defer stopHogs()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	untaken := failed.Load()
	if untaken > 0 {
		// A loaded machine can time a few out; they are left out of the
		// figures, and reported.
		b.Logf("%d of %d locks not taken; the first: %v", untaken, n, *first.Load())
	}
	if untaken == int64(n) {
		b.Fatal("no lock taken")
	}

	// granted[i] is lock i's Until when taken. The window below starts only
	// once every lock has made its first extension, which comes a period
	// after it was taken; the locks were taken over take, and on a slow
	// client the first extensions fall further behind, so waiting for them
	// (rather than for a fixed time) is what makes the window clean.
	granted := make([]time.Time, n)
	for i, l := range locks {
		if l != nil {
			granted[i] = l.Until()
		}
	}
	firstDone := func() (left int) {
		for i, l := range locks {
			if l != nil && !isDone(l) && !l.Until().After(granted[i]) {
				left++
			}
		}
		return left
	}
	for left := firstDone(); left > 0; left = firstDone() {
		// A lock that misses its extensions expires (and then counts as
		// lost, not here) by the TTL after it was taken: this only stops
		// a harness bug from waiting forever.
		if time.Since(start) > take+ttl+time.Minute {
			b.Fatalf("%d live locks had not extended once %v after all were taken (the TTL is %v)", left, time.Since(start)-take, ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := time.Since(start)
	probe.mark("gap")
	u0 := make([]time.Time, n)
	// The extensions come in rounds, one per lock a period apart (a little
	// less: the validity each counts from lost the drift allowance; more
	// on a slow client), as bunched as the taking was. A window one period
	// long sees each lock about once, whatever its phase, but where its
	// edges fall inside a round, timer slack decides whether the locks at
	// the edge count in it or in the next: so it starts in the middle of
	// the gap after the first round (when the round is shorter than a
	// period; else the extensions are spread and any phase will do).
	if next := start.Add(2 * period); time.Now().Before(next) {
		time.Sleep(time.Until(next) / 2)
	}
	for i, l := range locks {
		if l != nil {
			u0[i] = l.Until()
		}
	}
	// One whole period: the steady state, in which each lock extends once,
	// so the CPU the window took is the CPU of n extensions plus what
	// holding n locks costs meanwhile (timers, the collector walking their
	// heap), which is what a holder pays.
	stopProfile := profileWindow(b, n)
	probe.mark("window")
	m0 := hm.snap(b)
	cost0 := bench.ReadCost()
	w0 := time.Now()
	time.Sleep(period)
	window := time.Since(w0)
	cost := bench.ReadCost().Sub(cost0)
	m1 := hm.snap(b)
	probe.mark("after")
	stopProfile()
	u1 := make([]time.Time, n)
	var ext, lost int
	lostWhy := map[string]int{}
	for i, l := range locks {
		if l == nil {
			continue
		}
		if isDone(l) {
			if lost++; lost == 1 {
				b.Logf("lost: %v", l.Err())
			}
			why := "other"
			if errors.Is(l.Err(), api.ErrExpired) {
				why = "validity ran out"
			} else if errors.Is(l.Err(), api.ErrNotHeld) {
				why = "an extension failed"
			}
			if !l.Until().After(granted[i]) {
				why += ", never extended"
			}
			lostWhy[why]++
			continue
		}
		u1[i] = l.Until()
		// Each extension moves Until on by the time since the one before:
		// a period, give or take the drift allowance and the client's lag.
		ext += int(math.Round(float64(l.Until().Sub(u0[i])) / float64(period)))
	}
	b.StopTimer()
	if lost > 0 {
		b.Logf("lost locks by cause: %v", lostWhy)
	}

	b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/float64(n), "B/lock")
	rate := float64(ext) / window.Seconds()
	b.ReportMetric(rate, "ext/s")
	b.ReportMetric(window.Seconds(), "window-s")
	if ext > 0 && cost.HaveCPU {
		perExt := float64(cost.CPU) / float64(time.Microsecond) / float64(ext)
		b.ReportMetric(perExt, "cpu-us/ext")
		b.ReportMetric(float64(cost.CPU)/float64(window)*100, "core-pct")
	}
	b.ReportMetric(take.Seconds(), "take-s")
	b.ReportMetric(after.Seconds(), "first-ext-s")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(untaken), "untaken")
	probe.report(b, "window")
	reportLags(b, sendLags(u0, u1, locks, period, ttl, share))
	hm.report(b, m0, m1, hm.snap(b))
	b.Logf("%d locks, ttl %v, extension period %v; all first extensions done %v after the start; window %v: %d extensions in it (%.2f per live lock), %d lost",
		n, ttl, period, after.Round(time.Millisecond), window.Round(time.Millisecond), ext, float64(ext)/float64(max(1, n-int(untaken)-lost)), lost)

	stopHogs()
	// Release them all, so that later benchmarks meet clean masters.
	next.Store(0)
	for range lockers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if locks[i] != nil {
					_ = locks[i].Unlock(ctx)
				}
			}
		})
	}
	wg.Wait()
}

func isDone(l api.Lock) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}
