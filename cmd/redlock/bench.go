package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
)

func init() { register(newBenchCmd) }

// benchOptions configures one load run; see the flags for what each means.
type benchOptions struct {
	Nodes       []string // Redis masters; empty: embedded in-memory masters (or Spawn)
	Spawn       int      // start this many local redis-server processes
	Concurrency int
	Keys        int
	Duration    time.Duration
	TTL         time.Duration
	Fencing     bool
	JSON        bool
	Plot        string
	Progress    io.Writer // the progress bar's terminal; nil: no bar
	MetricsAddr string    // serve Prometheus metrics here while running

	// MasterTimeout bounds one master's answer (the engine's option); a
	// loaded machine needs more than the default to count no timeouts.
	MasterTimeout time.Duration
}

// memoryMasters is how many embedded masters bench runs on by default.
const memoryMasters = 5

func defaultBenchOptions() benchOptions {
	return benchOptions{
		Concurrency: 256,
		Duration:    10 * time.Second,
		TTL:         10 * time.Second,

		MasterTimeout: api.DefaultOptions().MasterTimeout,
	}
}

func newBenchCmd() *cobra.Command {
	o := defaultBenchOptions()
	var nodes string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure lock throughput and latency under load",
		Long: `bench runs --concurrency lockers for --duration, each running lock cycles
one after the other: take a lock, release it. With --keys 0 (the default)
every cycle takes a fresh key with one attempt (TryLock): the cost of the lock
itself. With --keys K the lockers share K keys and each cycle waits for its
key (Lock): contention.

It reports cycles per second, how many cycles got the lock, failures, cycle
latency percentiles (HDR histogram) and allocations per cycle; --json prints
the same as one JSON object, and --plot draws the latency histogram and the
throughput over time.

Masters: five embedded in-memory masters unless --nodes (or ` + nodesEnv + `)
names Redis masters, or --spawn-redis N starts N local redis-server processes
(no persistence) for the run and stops them after it, also on Ctrl-C.

Exit status: 0 when the run finished (failed cycles are counted, not fatal),
2 on a usage or setup error (masters that cannot grant a lock), 130 when
interrupted.`,
		Example: `  # five embedded in-memory masters, 256 lockers, 10s
  redlock bench

  # five local redis-server processes, 64 lockers on 16 keys, a chart
  redlock bench --spawn-redis 5 --concurrency 64 --keys 16 --plot bench.png

  # your masters, one JSON object
  redlock bench --nodes r1:6379,r2:6379,r3:6379 --duration 30s --json`,
		Args: flagsOnly("bench"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			switch {
			case fl.Changed("nodes") && fl.Changed("spawn-redis"):
				return usagef("--nodes and --spawn-redis exclude each other: --spawn-redis starts its own masters")
			case !fl.Changed("spawn-redis"):
				o.Nodes = masters(cmd, nodes)
			}
			if err := o.validate(); err != nil {
				return usageErr(err)
			}
			if !o.JSON && isTerminal(cmd.OutOrStdout()) && isTerminal(cmd.ErrOrStderr()) {
				o.Progress = cmd.ErrOrStderr()
			}
			if o.MetricsAddr != "" {
				stop, err := serveMetrics(o.MetricsAddr, cmd.ErrOrStderr())
				if err != nil {
					return usageErr(err)
				}
				defer stop()
			}
			return runBenchCmd(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodes, "nodes", "", "comma-separated Redis masters ("+nodesForms+"); default $"+nodesEnv+", else five embedded in-memory masters")
	f.IntVar(&o.Spawn, "spawn-redis", 0, "start this many local redis-server processes on free loopback ports for the run (no persistence) and stop them after")
	f.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "concurrent lockers")
	f.IntVar(&o.Keys, "keys", o.Keys, "keys the lockers share (Lock, contended); 0: a fresh key per cycle (TryLock)")
	f.DurationVar(&o.Duration, "duration", o.Duration, "how long to run")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock time to live")
	f.DurationVar(&o.MasterTimeout, "master-timeout", o.MasterTimeout, "bound on one master's answer (a batch waiting in a master's queue counts)")
	f.BoolVar(&o.Fencing, "fencing", false, "take locks with fencing tokens (one more round trip per lock)")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object instead of the report (and no progress bar)")
	f.StringVar(&o.Plot, "plot", "", "write a chart of the latency histogram and the throughput over time to this .png or .svg file")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve the engine's metrics for Prometheus at http://HOST:PORT/metrics while it runs (OBSERVABILITY.md)")
	f.SortFlags = false
	return cmd
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (o *benchOptions) validate() error {
	switch {
	case o.Spawn < 0 || o.Spawn > api.MaxMasters:
		return fmt.Errorf("--spawn-redis %d: want 1 to %d (or 0 for none)", o.Spawn, api.MaxMasters)
	case o.Concurrency < 1 || o.Concurrency > 100_000:
		return fmt.Errorf("--concurrency %d: want 1 to 100000", o.Concurrency)
	case o.Keys < 0:
		return fmt.Errorf("--keys %d: want 0 (a fresh key per cycle) or more", o.Keys)
	case o.Duration <= 0:
		return fmt.Errorf("--duration %v: want a positive duration", o.Duration)
	case o.MasterTimeout <= 0:
		return fmt.Errorf("--master-timeout %v: want a positive duration", o.MasterTimeout)
	}
	if o.Plot != "" {
		switch strings.ToLower(filepath.Ext(o.Plot)) {
		case ".png", ".svg":
		default:
			return fmt.Errorf("--plot %q: want a file name ending in .png or .svg", o.Plot)
		}
	}
	return checkTTL(o.TTL)
}

// benchReport is what a run measured, as --json prints it.
type benchReport struct {
	Backend        string   `json:"backend"` // "memory" or "redis"
	Masters        int      `json:"masters"`
	Quorum         int      `json:"quorum"`
	Nodes          []string `json:"nodes,omitempty"`
	Spawned        bool     `json:"spawned,omitempty"`
	Concurrency    int      `json:"concurrency"`
	Keys           int      `json:"keys"`
	TTLMS          float64  `json:"ttl_ms"`
	Fencing        bool     `json:"fencing"`
	DurationMS     float64  `json:"duration_ms"`
	Cycles         int64    `json:"cycles"`
	CyclesPerSec   float64  `json:"cycles_per_sec"`
	Acquired       int64    `json:"acquired"`
	AcquiredPerSec float64  `json:"acquired_per_sec"`
	NotAcquired    int64    `json:"not_acquired"`
	Errors         int64    `json:"errors"`
	FirstError     string   `json:"first_error,omitempty"`
	P50MS          float64  `json:"p50_ms"`
	P90MS          float64  `json:"p90_ms"`
	P99MS          float64  `json:"p99_ms"`
	P999MS         float64  `json:"p999_ms"`
	MaxMS          float64  `json:"max_ms"`
	MeanMS         float64  `json:"mean_ms"`
	AllocsPerCycle float64  `json:"allocs_per_cycle"`
	BytesPerCycle  float64  `json:"bytes_per_cycle"`
	// Cost is the process's CPU, read/write system calls and context
	// switches per cycle (Linux; zero elsewhere): with the embedded masters
	// it includes theirs.
	Cost *bench.PerCycle `json:"cost_per_cycle,omitempty"`

	summary    bench.Summary
	hist       *hdrhistogram.Histogram
	throughput []sample
}

// sample is the throughput of one interval of the run.
type sample struct {
	at     time.Duration // end of the interval, from the start
	perSec float64
}

// runBenchCmd runs the benchmark and writes the report (or JSON, and the
// plot). It returns nil or an *exitError.
func runBenchCmd(ctx context.Context, w io.Writer, o benchOptions) error {
	rep, err := runBench(ctx, o)
	if err != nil {
		return err
	}
	if o.Plot != "" {
		if err := writePlot(o.Plot, rep); err != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf("--plot: %w", err)}
		}
	}
	if o.JSON {
		if err := json.NewEncoder(w).Encode(rep); err != nil {
			return &exitError{code: exitFailure, err: err}
		}
		return nil
	}
	printBenchReport(w, rep, o)
	return nil
}

// runBench starts the masters (--spawn-redis) and the engine, runs the load
// and stops everything again.
func runBench(ctx context.Context, o benchOptions) (*benchReport, error) {
	rep := &benchReport{Backend: "memory", Concurrency: o.Concurrency, Keys: o.Keys, TTLMS: bench.Ms(o.TTL), Fencing: o.Fencing}
	opts := []api.Option{api.WithTTL(o.TTL), api.WithFencing(o.Fencing), api.WithMasterTimeout(o.MasterTimeout)}
	var (
		eng *engine.Engine
		err error
	)
	switch {
	case o.Spawn > 0:
		servers, err := redisproc.Start(ctx, o.Spawn)
		switch {
		case ctx.Err() != nil:
			redisproc.StopAll(servers)
			return nil, &exitError{code: exitInterrupted, err: errors.New("interrupted")}
		case errors.Is(err, redisproc.ErrNotFound):
			return nil, &exitError{code: exitUsage, err: errNoRedis}
		case err != nil:
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--spawn-redis: %w", err)}
		}
		defer redisproc.StopAll(servers)
		rep.Backend, rep.Nodes, rep.Spawned = "redis", make([]string, len(servers)), true
		for i, s := range servers {
			rep.Nodes[i] = s.Addr
		}
		spawnHook(rep.Nodes)
		// Masters born for this run have nothing to forget: no restart
		// quarantine.
		eng, err = engine.New(rep.Nodes, append(opts, api.WithoutRestartQuarantine())...)
		if err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
	case len(o.Nodes) > 0:
		rep.Backend, rep.Nodes = "redis", o.Nodes
		eng, err = engine.New(o.Nodes, opts...)
	default:
		eng, err = engine.NewMemory(memoryMasters, opts...)
	}
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	defer eng.Close()
	rep.Masters, rep.Quorum = len(eng.Masters()), eng.Quorum()
	if err := probe(ctx, eng, io.Discard); err != nil {
		if ctx.Err() != nil {
			return nil, &exitError{code: exitInterrupted, err: errors.New("interrupted")}
		}
		return nil, &exitError{code: exitUsage, err: fmt.Errorf(
			"cannot take a lock: a majority (%d of %d) of the masters must be up and answering: %s",
			rep.Quorum, rep.Masters, strings.TrimPrefix(err.Error(), "redlock: "))}
	}

	rec := bench.NewRecorder()
	w := bench.Workload{Concurrency: o.Concurrency, Keys: o.Keys, Prefix: bench.RunPrefix("cli")}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cost0 := bench.ReadCost()
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(o.Duration))
	defer cancel()
	mon := startMonitor(runCtx, rec, start, o)
	bench.Run(runCtx, bench.Engine(eng), w, 0, rec)
	elapsed := time.Since(start)
	cost := bench.ReadCost().Sub(cost0)
	rep.throughput = mon.stop(elapsed)
	runtime.ReadMemStats(&after)
	if ctx.Err() != nil {
		return nil, &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	}

	s := rec.Summarize(elapsed)
	rep.summary, rep.hist = s, rec.Histogram()
	rep.DurationMS = bench.Ms(elapsed)
	rep.Cycles, rep.CyclesPerSec = s.Cycles, s.CyclesPerSec()
	rep.Acquired, rep.AcquiredPerSec = s.Acquired, s.AcquiredPerSec()
	rep.NotAcquired, rep.Errors = s.NotAcquired, s.Errors
	if s.FirstErr != nil {
		rep.FirstError = s.FirstErr.Error()
	}
	rep.P50MS, rep.P90MS, rep.P99MS = bench.Ms(s.P50), bench.Ms(s.P90), bench.Ms(s.P99)
	rep.P999MS, rep.MaxMS, rep.MeanMS = bench.Ms(s.P999), bench.Ms(s.Max), bench.Ms(s.Mean)
	if s.Cycles > 0 {
		rep.AllocsPerCycle = float64(after.Mallocs-before.Mallocs) / float64(s.Cycles)
		rep.BytesPerCycle = float64(after.TotalAlloc-before.TotalAlloc) / float64(s.Cycles)
		if cost.HaveCPU && cost.HaveIO {
			pc := cost.Per(s.Cycles)
			rep.Cost = &pc
		}
	}
	return rep, nil
}

// monitor samples the throughput while the run goes on and drives the
// progress bar.
type monitor struct {
	rec      *bench.Recorder
	start    time.Time
	interval time.Duration
	bar      *progressbar.ProgressBar
	done     chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	samples []sample
	last    int64
	lastAt  time.Duration
}

func startMonitor(ctx context.Context, rec *bench.Recorder, start time.Time, o benchOptions) *monitor {
	// About a hundred points over the run, no finer than 50ms.
	m := &monitor{rec: rec, start: start, interval: min(max(o.Duration/100, 50*time.Millisecond), time.Second), done: make(chan struct{})}
	if o.Progress != nil {
		m.bar = progressbar.NewOptions64(o.Duration.Milliseconds(),
			progressbar.OptionSetWriter(o.Progress),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetDescription("starting"),
		)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(m.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.done:
				return
			case <-t.C:
				m.tick(time.Since(start))
			}
		}
	}()
	return m
}

// tick records the throughput since the last tick, at elapsed.
func (m *monitor) tick(elapsed time.Duration) {
	a, n, e := m.rec.Counts()
	total := a + n + e
	m.mu.Lock()
	if d := elapsed - m.lastAt; d > 0 {
		m.samples = append(m.samples, sample{at: elapsed, perSec: float64(total-m.last) / d.Seconds()})
	}
	m.last, m.lastAt = total, elapsed
	m.mu.Unlock()
	if m.bar != nil {
		desc := fmt.Sprintf("%s cycles, %s/s", num(total), num(int64(math.Round(float64(total)/elapsed.Seconds()))))
		if e > 0 {
			desc += fmt.Sprintf(", %s errors", num(e))
		}
		m.bar.Describe(desc)
		_ = m.bar.Set64(min(elapsed.Milliseconds(), m.bar.GetMax64()))
	}
}

// stop ends the sampling, adds the last interval unless it is too short to
// tell (the lockers were stopping), and returns the samples.
func (m *monitor) stop(elapsed time.Duration) []sample {
	close(m.done)
	m.wg.Wait()
	if elapsed-m.lastAt >= m.interval/2 || len(m.samples) == 0 {
		m.tick(elapsed)
	}
	if m.bar != nil {
		_ = m.bar.Finish()
	}
	return m.samples
}

func printBenchReport(w io.Writer, r *benchReport, o benchOptions) {
	where := fmt.Sprintf("%d embedded in-memory masters", r.Masters)
	if r.Backend == "redis" {
		where = fmt.Sprintf("%d Redis masters", r.Masters)
		if r.Spawned {
			where += " started for the run"
		}
	}
	load := "a fresh key per cycle (TryLock + Unlock)"
	if r.Keys > 0 {
		load = fmt.Sprintf("%s shared keys (Lock + Unlock)", num(int64(r.Keys)))
	}
	fencing := ""
	if r.Fencing {
		fencing = ", fencing tokens"
	}
	fmt.Fprintf(w, "redlock bench: %s lockers on %s, %s, quorum %d, ttl %v%s, ran %v\n\n",
		num(int64(r.Concurrency)), load, where, r.Quorum, o.TTL, fencing, dur(r.summary.Elapsed))

	s := r.summary
	rate := func(n int64) string { return num(int64(math.Round(perSec(n, s.Elapsed)))) + "/s" }
	rows := [][3]string{
		{"cycles", num(s.Cycles), rate(s.Cycles)},
		{"acquired", num(s.Acquired), rate(s.Acquired)},
		{"not acquired", num(s.NotAcquired), ""},
		{"errors", num(s.Errors), ""},
		{"latency p50", dur(s.P50), ""},
		{"        p90", dur(s.P90), ""},
		{"        p99", dur(s.P99), ""},
		{"        p99.9", dur(s.P999), ""},
		{"        max", dur(s.Max), ""},
		{"allocs/cycle", strconv.FormatFloat(r.AllocsPerCycle, 'f', 1, 64), fmt.Sprintf("%.0f B/cycle", r.BytesPerCycle)},
	}
	if c := r.Cost; c != nil {
		rows = append(rows,
			[3]string{"cpu/cycle", strconv.FormatFloat(c.CPUMicros, 'f', 1, 64) + " µs", ""},
			[3]string{"syscalls/cycle", strconv.FormatFloat(c.Reads+c.Writes, 'f', 2, 64), fmt.Sprintf("%.2f reads, %.2f writes", c.Reads, c.Writes)},
			[3]string{"switches/cycle", strconv.FormatFloat(c.Voluntary+c.Involuntary, 'f', 2, 64), fmt.Sprintf("%.2f voluntary, %.2f involuntary", c.Voluntary, c.Involuntary)},
		)
	}
	for _, row := range rows {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-14s %12s  %s", row[0], row[1], row[2]), " "))
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "\nfirst error: %s\n", r.FirstError)
	}
	if o.Plot != "" {
		fmt.Fprintf(w, "\nchart: %s\n", o.Plot)
	}
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// spawnHook sees the addresses of the servers --spawn-redis started; tests
// replace it.
var spawnHook = func(addrs []string) {}

// errNoRedis: --spawn-redis without redis-server on PATH.
var errNoRedis = errors.New("--spawn-redis: redis-server is not on PATH: install it (Debian: apt-get install redis-server) or name running masters with --nodes")
