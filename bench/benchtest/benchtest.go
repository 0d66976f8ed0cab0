// Package benchtest runs the standard benchmark workloads of package bench as
// go test sub-benchmarks, with the same names and metrics for every client,
// so that benchstat can put the engine and redsync side by side.
//
// Masters: NodesEnv (REDLOCK_BENCH_NODES) names Redis masters to run
// against, as bench/run.sh does so that both clients meet the same five
// processes; without it, RedisNodes starts five redis-server processes of its
// own for the benchmark.
package benchtest

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/internal/redistest"
)

// NodesEnv names the Redis masters the benchmarks use, comma-separated
// host:port, instead of starting their own.
const NodesEnv = "REDLOCK_BENCH_NODES"

// Concurrencies are the numbers of lockers every workload runs with.
var Concurrencies = []int{1, 16, 64, 256, 1024}

// RedisNodes returns the addresses of the Redis masters to benchmark against:
// those in NodesEnv, else five redis-server processes started for b (and
// stopped by its cleanup).
//
// It also notes the servers' process ids (when they are local) for the
// machine accounting of the workloads that follow (see Run).
func RedisNodes(b *testing.B) []string {
	b.Helper()
	if env := strings.TrimSpace(os.Getenv(NodesEnv)); env != "" {
		nodes := strings.Split(env, ",")
		for i := range nodes {
			nodes[i] = strings.TrimSpace(nodes[i])
		}
		pids := bench.LocalPids(nodes)
		serverPids.Store(&pids)
		return nodes
	}
	servers := redistest.Start(b, 5)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	pids := bench.LocalPids(addrs)
	serverPids.Store(&pids)
	b.Cleanup(func() { serverPids.Store(nil) })
	return addrs
}

// serverPids are the local Redis servers of the last RedisNodes, whose CPU
// the machine accounting charges to "servers".
var serverPids atomic.Pointer[[]int]

// Run runs every standard workload on client as a sub-benchmark of b:
// uncontended/c=C and contended/c=C/k=C/4 for each of Concurrencies. It
// first waits (up to 10s) until a lock can be taken.
//
// Each reports, besides ns/op (per cycle) and -benchmem's per-cycle
// allocations:
//
//	cycles/s     finished cycles per second
//	ok-cycles/s  cycles that held the lock (all of them, uncontended)
//	p50-ms       median cycle latency (Lock or TryLock + Unlock)
//	p99-ms       99th percentile cycle latency
//	cpu-us/cycle the process's CPU time (user + system) per cycle: the
//	             client's, and on the memory transport the masters' too. It
//	             moves less with other load on the machine than cycles/s
//	             does (though it does move), so compare two builds by it,
//	             in interleaved runs.
//	reads/cycle, writes/cycle
//	             read-like and write-like system calls per cycle
//	             (/proc/self/io; Linux only): socket reads and writes.
//	vcsw/cycle, ivcsw/cycle
//	             voluntary context switches (a thread blocked: a wake-up to
//	             pay later) and involuntary ones (the kernel took a core
//	             away) per cycle (getrusage).
//
// and the whole machine's time per cycle (bench.Account; /proc/stat, 10 ms
// ticks, so only runs of a second or more give figures worth reading):
//
//	srv-us/cycle     the local Redis servers' CPU (0 on the memory masters)
//	others-us/cycle  every other process's CPU and the kernel's own work
//	                 (other users of a shared machine show here)
//	idle-us/cycle    time a core had nothing to run (idle + iowait)
//	steal-us/cycle   time the hypervisor gave a core to someone else
//	softirq-us/cycle interrupt work (loopback delivery), already included
//	                 in the terms above
//	total-us/cycle   cores × wall time: cpu-us + srv-us + others-us +
//	                 idle-us + steal-us come to this, up to tick rounding
//
// and where the cores sit (bench.CoreRoundTrip, read before and after the
// timed part, not counted in it):
//
//	xcore-before-ns, xcore-after-ns
//	          a cache line's round trip between two cores: about 55 ns
//	          when the VM's vCPUs sit near each other, 330 when far apart.
//	          The figures above follow it; compare runs at the same
//	          placement (bench/placement.py). Two readings that differ
//	          say the run straddled a move; two that agree do not rule
//	          out a move there and back.
func Run(b *testing.B, name string, client bench.Client) {
	b.Helper()
	prefix := bench.RunPrefix(name)
	if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
		b.Fatalf("no lock could be taken in 10s: %v", err)
	}
	for _, c := range Concurrencies {
		w := bench.Uncontended(c, prefix+"u"+strconv.Itoa(c)+":")
		b.Run(w.Name(), func(b *testing.B) { RunWorkload(b, client, w) })
	}
	for _, c := range Concurrencies {
		w := bench.Contended(c, prefix+"c"+strconv.Itoa(c)+":")
		b.Run(w.Name(), func(b *testing.B) { RunWorkload(b, client, w) })
	}
}

// ContentionLockers are the numbers of lockers RunContention puts on one key.
var ContentionLockers = []int{1, 16, 256, 1024, 4096}

// MaxContentionEnv caps the lockers of RunContention (bench/scale.sh sets
// it for redsync, whose lockers on one key spin on retries).
const MaxContentionEnv = "REDLOCK_BENCH_MAX_CONTENTION"

// MaxContention is MaxContentionEnv's value, or 0 (no cap).
func MaxContention() int {
	n, _ := strconv.Atoi(os.Getenv(MaxContentionEnv))
	return max(n, 0)
}

// RunContention runs C lockers on one key (Lock, retrying, then Unlock) for
// each C in ContentionLockers up to maxLockers (0: all), as sub-benchmarks
// "onekey/c=C". Besides Run's metrics, each reports the fairness of the
// grants among the lockers: grants-cv (the coefficient of variation of
// successful cycles per locker; 0 is even), grants-min and grants-max per
// locker over the mean (1 and 1 is even), and starved (lockers that never
// got the lock). Give it enough cycles for every locker to have several
// turns: -benchtime 8x per locker or more.
func RunContention(b *testing.B, name string, client bench.Client, maxLockers int) {
	b.Helper()
	prefix := bench.RunPrefix(name)
	if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
		b.Fatalf("no lock could be taken in 10s: %v", err)
	}
	for _, c := range ContentionLockers {
		if maxLockers > 0 && c > maxLockers {
			continue
		}
		w := bench.Workload{Concurrency: c, Keys: 1, Prefix: prefix + "one" + strconv.Itoa(c) + ":"}
		b.Run("onekey/c="+strconv.Itoa(c), func(b *testing.B) {
			rec := runWorkload(b, client, w, true)
			f := rec.Fairness()
			if f.Mean > 0 {
				b.ReportMetric(f.CV, "grants-cv")
				b.ReportMetric(float64(f.Min)/f.Mean, "grants-min")
				b.ReportMetric(float64(f.Max)/f.Mean, "grants-max")
				b.ReportMetric(float64(f.Starved), "starved")
			}
		})
	}
}

// RunWorkload runs b.N cycles of w on client and reports the metrics Run
// describes. Everything before the call is set-up: not timed, not counted.
func RunWorkload(b *testing.B, client bench.Client, w bench.Workload) {
	runWorkload(b, client, w, false)
}

func runWorkload(b *testing.B, client bench.Client, w bench.Workload, fairness bool) *bench.Recorder {
	rec := bench.NewRecorder()
	if fairness {
		rec.TrackWorkers(w.Concurrency)
	}
	b.ReportAllocs()
	xcore0, haveX0 := coreRoundTrip()
	b.ResetTimer()
	var pids []int
	if p := serverPids.Load(); p != nil {
		pids = *p
	}
	m0 := bench.ReadMachine(pids)
	cost0 := bench.ReadCost()
	start := time.Now()
	bench.Run(context.Background(), client, w, int64(b.N), rec)
	elapsed := time.Since(start)
	cost := bench.ReadCost().Sub(cost0)
	m := bench.ReadMachine(pids).Sub(m0)
	b.StopTimer()
	xcore1, haveX1 := coreRoundTrip()
	s := rec.Summarize(elapsed)
	if s.Errors > 0 {
		b.Logf("%d of %d cycles failed; the first: %v", s.Errors, s.Cycles, s.FirstErr)
	}
	if w.Keys == 0 && s.NotAcquired > 0 {
		b.Logf("%d of %d fresh keys were not acquired", s.NotAcquired, s.Cycles)
	}
	b.ReportMetric(s.CyclesPerSec(), "cycles/s")
	b.ReportMetric(s.AcquiredPerSec(), "ok-cycles/s")
	b.ReportMetric(bench.Ms(s.P50), "p50-ms")
	b.ReportMetric(bench.Ms(s.P99), "p99-ms")
	if s.Cycles > 0 {
		ReportCost(b, cost, s.Cycles)
		ReportMachine(b, m, cost, elapsed, s.Cycles)
	}
	if haveX0 && haveX1 {
		// Where the cores sat, before and after: a run whose two readings
		// differ straddled a move (bench.CoreRoundTrip).
		b.ReportMetric(float64(xcore0), "xcore-before-ns")
		b.ReportMetric(float64(xcore1), "xcore-after-ns")
	}
	return rec
}

// xcoreRounds: 100k round trips take 5-35 ms, outside the timed part.
const xcoreRounds = 100_000

// XcoreEnv set to "off" skips the probe of where the cores sit. Under
// valgrind, which runs one thread at a time, the probe's two goroutines
// spin until its time budget runs out, and the instructions they burn
// swamp a count of the benchmark's own (bench/instructions.sh).
const XcoreEnv = "REDLOCK_BENCH_XCORE"

func coreRoundTrip() (time.Duration, bool) {
	if os.Getenv(XcoreEnv) == "off" {
		return 0, false
	}
	return bench.CoreRoundTrip(xcoreRounds, time.Second)
}

// ReportCost reports cost spent over cycles as the per-cycle metrics Run
// describes.
func ReportCost(b *testing.B, cost bench.Cost, cycles int64) {
	p := cost.Per(cycles)
	if cost.HaveCPU {
		b.ReportMetric(p.CPUMicros, "cpu-us/cycle")
		b.ReportMetric(p.Voluntary, "vcsw/cycle")
		b.ReportMetric(p.Involuntary, "ivcsw/cycle")
	}
	if cost.HaveIO {
		b.ReportMetric(p.Reads, "reads/cycle")
		b.ReportMetric(p.Writes, "writes/cycle")
	}
}

// ReportMachine reports the machine accounting of a run (see Run): m is
// the machine's delta over it, cost the client's own.
func ReportMachine(b *testing.B, m bench.Machine, cost bench.Cost, wall time.Duration, cycles int64) {
	if !m.Have || !cost.HaveCPU {
		return
	}
	a := bench.AccountFor(m, cost.CPU, wall, cycles)
	if m.HaveProcs {
		b.ReportMetric(a.Servers, "srv-us/cycle")
	}
	b.ReportMetric(a.Others, "others-us/cycle")
	b.ReportMetric(a.Idle, "idle-us/cycle")
	b.ReportMetric(a.Steal, "steal-us/cycle")
	b.ReportMetric(a.SoftIRQ, "softirq-us/cycle")
	b.ReportMetric(a.Total, "total-us/cycle")
}
