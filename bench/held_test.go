package bench_test

import (
	"context"
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
//	ext/s        the steady auto-extension rate: N over the extension
//	             period (half the validity)
//	cpu-us/ext   the process's CPU per extension, measured over the window
//	             in which every lock makes its first extension (a period
//	             after it was taken), with nothing else running
//	core-pct     what that rate costs: ext/s × cpu-us/ext, in % of one core
//	take-s       seconds to take the N locks (256 lockers)
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
		margin  = time.Second
	)
	period := max(10*time.Second, time.Duration(float64(n)/maxRate*float64(time.Second)))
	ttl := time.Duration(float64(period) / share)
	e, err := engine.New(nodes, api.WithoutRestartQuarantine(), api.WithTTL(ttl), api.WithAutoExtend(share))
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

	until := make([]time.Time, n)
	for i, l := range locks {
		if l != nil {
			until[i] = l.Until()
		}
	}
	// Lock i extends about a period after it was taken: the window covers
	// every first extension and no second one.
	if wait := time.Until(start.Add(period - margin)); wait > 0 {
		time.Sleep(wait)
	} else {
		b.Logf("taking the locks took %v, longer than the extension period %v less %v: the window includes some of it", take, period, margin)
	}
	cost0 := bench.ReadCost()
	w0 := time.Now()
	time.Sleep(time.Until(start.Add(period + take + margin)))
	window := time.Since(w0)
	cost := bench.ReadCost().Sub(cost0)
	var ext, lost int
	for i, l := range locks {
		if l == nil {
			continue
		}
		select {
		case <-l.Done():
			if lost++; lost == 1 {
				b.Logf("lost: %v", l.Err())
			}
			continue
		default:
		}
		if l.Until().After(until[i]) {
			ext++
		}
	}
	b.StopTimer()

	b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/float64(n), "B/lock")
	rate := float64(n) / period.Seconds()
	b.ReportMetric(rate, "ext/s")
	if ext > 0 && cost.HaveCPU {
		perExt := float64(cost.CPU) / float64(time.Microsecond) / float64(ext)
		b.ReportMetric(perExt, "cpu-us/ext")
		b.ReportMetric(rate*perExt/1e6*100, "core-pct")
	}
	b.ReportMetric(take.Seconds(), "take-s")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(untaken), "untaken")
	b.Logf("%d locks, ttl %v, extension period %v, window %v: %d extensions in it, %d lost", n, ttl, period, window, ext, lost)

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
