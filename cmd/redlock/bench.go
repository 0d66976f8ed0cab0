package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/mediocregopher/radix/v4"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/engine"
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
			return runBenchCmd(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodes, "nodes", "", "comma-separated Redis masters (host:port, redis://[user:pass@]host:port[/db], rediss://...); default $"+nodesEnv+", else five embedded in-memory masters")
	f.IntVar(&o.Spawn, "spawn-redis", 0, "start this many local redis-server processes on free loopback ports for the run (no persistence) and stop them after")
	f.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "concurrent lockers")
	f.IntVar(&o.Keys, "keys", o.Keys, "keys the lockers share (Lock, contended); 0: a fresh key per cycle (TryLock)")
	f.DurationVar(&o.Duration, "duration", o.Duration, "how long to run")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock time to live")
	f.DurationVar(&o.MasterTimeout, "master-timeout", o.MasterTimeout, "bound on one master's answer (a batch waiting in a master's queue counts)")
	f.BoolVar(&o.Fencing, "fencing", false, "take locks with fencing tokens (one more round trip per lock)")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object instead of the report (and no progress bar)")
	f.StringVar(&o.Plot, "plot", "", "write a chart of the latency histogram and the throughput over time to this .png or .svg file")
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
		servers, err := spawnRedis(ctx, o.Spawn)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &exitError{code: exitInterrupted, err: errors.New("interrupted")}
			}
			return nil, &exitError{code: exitUsage, err: err}
		}
		defer servers.stop()
		spawnHook(servers)
		rep.Backend, rep.Nodes, rep.Spawned = "redis", servers.addrs(), true
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
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(o.Duration))
	defer cancel()
	mon := startMonitor(runCtx, rec, start, o)
	bench.Run(runCtx, bench.Engine(eng), w, 0, rec)
	elapsed := time.Since(start)
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

// writePlot draws the latency histogram and the throughput over time side by
// side, as PNG or SVG by the file's extension.
func writePlot(file string, r *benchReport) error {
	hist, err := latencyPlot(r)
	if err != nil {
		return err
	}
	tput, err := throughputPlot(r)
	if err != nil {
		return err
	}
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	c, err := draw.NewFormattedCanvas(11*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{hist, tput}}
	canvases := plot.Align(plots, tiles, dc)
	hist.Draw(canvases[0][0])
	tput.Draw(canvases[0][1])
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var (
	barColor  = color.RGBA{R: 70, G: 130, B: 180, A: 255}
	p50Color  = color.RGBA{R: 46, G: 139, B: 87, A: 255}
	p99Color  = color.RGBA{R: 205, G: 92, B: 92, A: 255}
	lineColor = color.RGBA{R: 25, G: 25, B: 112, A: 255}
)

// latencyPlot is the histogram of cycle latencies on a log scale, with p50
// and p99 marked.
func latencyPlot(r *benchReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("cycle latency (%s cycles)", num(r.Cycles))
	p.X.Label.Text = "latency (ms, log scale)"
	p.Y.Label.Text = "cycles"
	p.Y.Tick.Marker = shortTicks{}
	bins := logBins(r.hist, 60)
	if len(bins) == 0 {
		// No cycle finished: an empty axis on a log scale makes gonum
		// panic, a linear one just stays empty.
		p.X.Label.Text = "latency (ms): no cycle finished"
		return p, nil
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	h := &plotter.Histogram{Bins: bins, FillColor: barColor, LineStyle: plotter.DefaultLineStyle}
	h.LineStyle.Width = vg.Points(0.5)
	p.Add(h)
	var top float64
	for _, b := range bins {
		top = max(top, b.Weight)
	}
	for _, m := range []struct {
		name string
		ms   float64
		c    color.Color
	}{{"p50", r.P50MS, p50Color}, {"p99", r.P99MS, p99Color}} {
		if m.ms <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: m.ms, Y: 0}, {X: m.ms, Y: top * 1.02}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = m.c, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %s", m.name, dur(time.Duration(m.ms*float64(time.Millisecond)))), l)
	}
	// Room above the bars for the legend.
	p.Y.Max = top * 1.3
	p.Legend.Top = true
	return p, nil
}

// logBins spreads the histogram's counts over n bins of equal width on a log
// scale, in milliseconds.
func logBins(h *hdrhistogram.Histogram, n int) []plotter.HistogramBin {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	lo := math.Max(float64(h.Min()), 1) / 1000
	hi := float64(h.Max()) / 1000
	if hi <= lo*1.01 {
		hi = lo * 1.5
	}
	lo, hi = lo*0.95, hi*1.05
	step := math.Log(hi/lo) / float64(n)
	bins := make([]plotter.HistogramBin, n)
	for i := range bins {
		bins[i].Min = lo * math.Exp(step*float64(i))
		bins[i].Max = lo * math.Exp(step*float64(i+1))
	}
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		ms := (float64(b.From) + float64(b.To)) / 2 / 1000
		i := int(math.Log(ms/lo) / step)
		bins[max(0, min(i, n-1))].Weight += float64(b.Count)
	}
	return bins
}

// throughputPlot is cycles per second over the run.
func throughputPlot(r *benchReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("throughput (mean %s cycles/s)", num(int64(math.Round(r.CyclesPerSec))))
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "cycles/s"
	p.Y.Min = 0
	pts := make(plotter.XYs, 0, len(r.throughput))
	var from time.Duration
	for _, s := range r.throughput {
		// Each sample at the middle of its interval.
		pts = append(pts, plotter.XY{X: (from + s.at).Seconds() / 2, Y: s.perSec})
		from = s.at
	}
	if len(pts) == 0 {
		return p, nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = lineColor, vg.Points(1.5)
	p.Add(l, plotter.NewGrid())
	p.Y.Tick.Marker = shortTicks{}
	return p, nil
}

// shortTicks are plot's default ticks labelled 50k, 1.2M rather than
// 50000.00.
type shortTicks struct{}

func (shortTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		v, unit := ts[i].Value, ""
		switch {
		case math.Abs(v) >= 1e6:
			v, unit = v/1e6, "M"
		case math.Abs(v) >= 1e3:
			v, unit = v/1e3, "k"
		}
		ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64) + unit
	}
	return ts
}

// redisServers are redis-server processes started for a run.
type redisServers struct {
	dir   string
	procs []*redisProc
}

type redisProc struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// spawnHook sees the servers --spawn-redis started; tests replace it.
var spawnHook = func(*redisServers) {}

// errNoRedis: --spawn-redis without redis-server on PATH.
var errNoRedis = errors.New("--spawn-redis: redis-server is not on PATH: install it (Debian: apt-get install redis-server) or name running masters with --nodes")

// spawnRedis starts n redis-server processes on free loopback ports, with no
// persistence, and waits until each answers.
func spawnRedis(ctx context.Context, n int) (*redisServers, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedis
	}
	dir, err := os.MkdirTemp("", "redlock-bench-redis-")
	if err != nil {
		return nil, err
	}
	s := &redisServers{dir: dir, procs: make([]*redisProc, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.procs[i], errs[i] = startRedis(ctx, bin, dir, i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.stop()
		return nil, fmt.Errorf("--spawn-redis: %w", err)
	}
	return s, nil
}

func (s *redisServers) addrs() []string {
	out := make([]string, len(s.procs))
	for i, p := range s.procs {
		out[i] = p.addr
	}
	return out
}

// stop kills every server by its pid, waits for it and removes the
// servers' directory.
func (s *redisServers) stop() {
	for _, p := range s.procs {
		if p != nil {
			p.kill()
		}
	}
	_ = os.RemoveAll(s.dir)
}

func (p *redisProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.log.Close()
}

// startRedis starts server i on a free port; a port found free can be taken
// before redis binds it, so it tries a few.
func startRedis(ctx context.Context, bin, dir string, i int) (*redisProc, error) {
	var lastErr error
	for attempt := range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		logPath := filepath.Join(dir, fmt.Sprintf("redis-%d-%d.log", i, attempt))
		logf, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
			"--dir", dir, "--logfile", "")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = redisSysProcAttr()
		if err := cmd.Start(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("starting %s: %w", bin, err)
		}
		p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: make(chan struct{}), log: logf}
		go func() {
			_ = cmd.Wait()
			close(p.exited)
		}()
		if lastErr = waitRedis(ctx, p); lastErr == nil {
			return p, nil
		}
		p.kill()
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), "Address already in use") {
			return nil, fmt.Errorf("redis-server on %s: %w", p.addr, lastErr)
		}
	}
	return nil, fmt.Errorf("no free port after 5 attempts: %w", lastErr)
}

// waitRedis waits until p answers as itself (by pid: when the port was
// taken by another server meanwhile, that one answers too).
func waitRedis(ctx context.Context, p *redisProc) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want := "process_id:" + strconv.Itoa(p.cmd.Process.Pid) + "\r\n"
	var err error
	for {
		select {
		case <-p.exited:
			return errors.New("exited before answering")
		default:
		}
		var c radix.Conn
		if c, err = radix.Dial(ctx, "tcp", p.addr); err == nil {
			var info string
			err = c.Do(ctx, radix.Cmd(&info, "INFO", "server"))
			c.Close()
			if err == nil {
				if strings.Contains(info, want) {
					return nil
				}
				err = errors.New("answered by another process")
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer in time: %w", err)
		case <-p.exited:
			return errors.New("exited before answering")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
