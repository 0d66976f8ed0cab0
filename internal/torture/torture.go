// Package torture runs the lock engine against real redis-server masters
// under injected faults and checks the history of what every holder did:
// the engine behind `redlock torture`.
//
// Setup: five redis-server processes on free loopback ports (no
// persistence), started and stopped by pid (internal/redisproc); several
// independent engines, each with its own connections; with proxy faults on,
// every connection of every engine passes through a TCP fault proxy of its
// own (internal/faultproxy); every master of every engine is wrapped by the
// fault-injecting transport (transport/faulty).
//
// Workload: each engine runs clients that loop Lock (fencing on) ->
// critical section -> Unlock over a few keys, recording every grant and
// section in a history.Recorder. Most sections are short; a few hold the
// lock for much of its validity, a few keep it with auto-extension, and a
// few try to run past their validity and must be stopped by the lost-lock
// signal.
//
// Faults (by kind, chosen from a seeded generator): kill (kill -9 of one,
// two or a majority of masters and restart EMPTY on the same port at once),
// pause (SIGSTOP/SIGCONT), latency and partition (transport/faulty: added
// latency, unreachable masters, lost replies), proxy (delays, RST resets
// and cuts of real TCP connections), and the kinds a review called for
// (issue 9): script-flush (storms of SCRIPT FLUSH), address-flip (a
// master's address reaches another, long-running, empty redis-server),
// fence-loss (fencing write-backs lost on a minority while one engine's
// links to it are slow) and clock-drift (masters whose clock runs fast:
// the TTLs that reach them are scaled down).
//
// client-pause (pause.go, worker.go): two more engines, each in a worker
// process of its own, whose clients write to a protected resource (a
// separate redis-server) under their locks; a worker is stopped with
// SIGSTOP between a client's lock check and its write, past the lock's
// validity, then resumed.
//
// At the end history.Check judges the history. The in-process engines share
// this process's monotonic clock; the workers report CLOCK_MONOTONIC, which
// every process on the machine shares and which is converted to the same
// timebase, so all times are comparable.
package torture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
	"github.com/quorumlock/redlock/transport/redis"
)

// Fault kinds.
const (
	Kill      = "kill"
	Pause     = "pause"
	Latency   = "latency"
	Partition = "partition"
	Proxy     = "proxy"
	// ScriptFlush: storms of SCRIPT FLUSH on one, a majority or all masters.
	ScriptFlush = "script-flush"
	// AddressFlip: masters' addresses reach spare, long-running, empty
	// redis-servers for a while (through the fault proxies).
	AddressFlip = "address-flip"
	// FenceLoss: fencing write-backs (RaiseFence) lost on a minority of
	// masters, with one engine's links to them slow.
	FenceLoss = "fence-loss"
	// ClockDrift: masters whose clock runs Config.ClockDrift fast.
	ClockDrift = "clock-drift"
)

// Kinds lists every fault kind, in report order.
var Kinds = []string{Kill, Pause, Latency, Partition, Proxy, ScriptFlush, AddressFlip, FenceLoss, ClockDrift, ClientPause}

// Schedules.
const (
	// Mixed draws every fault kind enabled, with random targets and
	// durations.
	Mixed = "mixed"
	// SplitBrain only kills: each fault kills a majority of the masters
	// right after a client began a long critical section and restarts them
	// empty at once. Without the restart quarantine this hands the lock to
	// a second holder while the first still holds it; it is the negative
	// control that shows the checker bites.
	SplitBrain = "split-brain"
)

// Masters is the number of masters torture starts.
const Masters = 5

// Config is one torture run.
type Config struct {
	Duration   time.Duration
	Seed       uint64
	Engines    int
	Clients    int // per engine
	Keys       int
	Faults     []string // a subset of Kinds
	Schedule   string   // Mixed or SplitBrain
	Quarantine bool     // false: engines built WithoutRestartQuarantine
	// QuarantinePeriod is the restart quarantine period; 0 means the TTL.
	QuarantinePeriod time.Duration
	TTL              time.Duration
	MasterTimeout    time.Duration
	FaultInterval    time.Duration // mean time between two faults
	Work             time.Duration // the longest short critical section
	// Unfenced is the share of Lock calls (0 to 1) made without fencing:
	// the plain SET path, which fenced calls (a script) never take.
	Unfenced float64
	// ClockDrift is how fast the clock-drift fault makes a master's clock
	// run (0.005: 0.5% fast). The engine allows for 1% of the TTL plus 2ms;
	// past that the clock assumption is broken on purpose.
	ClockDrift float64
	// LongShare is the share of Lock calls whose holder keeps the lock for
	// 0.3 to 0.8 of the TTL (the sections targeted faults aim at); 0 means
	// the default, 0.4%. A negative control raises it so that a run on a
	// CPU-starved machine, with a tenth of the grants, still meets its fault.
	LongShare float64
	// Progress, when set, gets a line every ProgressEvery.
	Progress      io.Writer
	ProgressEvery time.Duration
	// MaxListed bounds the violations listed in the report (all are counted).
	MaxListed int
	// EngineLog, when set, receives the engines' logs (warnings and up),
	// each line tagged with its engine.
	EngineLog io.Writer
	// NoFencing: clients lock without fencing tokens, and the client-pause
	// resource accepts every write (the negative control of client-pause).
	NoFencing bool
	// WorkerCommand starts a client-pause worker process: the program and
	// its first arguments, to which the worker's flags are appended
	// (`redlock torture-worker`; see WorkerMain). Needed for client-pause.
	WorkerCommand []string
	// Workloads are what the clients do, dealt to them in turn (see
	// AllWorkloads); empty means mutex only.
	Workloads []string
	// ClusterShards, when above 0, makes each master a Redis Cluster of this
	// many shards (cluster.go), with the faults of ClusterKinds.
	ClusterShards int
	// Tail is how long the clients run fault-free after the faulted phase
	// has healed and settled, before the end-of-run key check
	// (keysleft.go); 0 means the TTL plus 2s.
	Tail time.Duration

	// plant, in tests, runs after the engines closed and before the key
	// check reads the servers.
	plant func([]scanTarget)
}

// DefaultConfig is the configuration of a plain `redlock torture`.
func DefaultConfig() Config {
	return Config{
		Duration:      time.Minute,
		Seed:          1,
		Engines:       3,
		Clients:       24,
		Keys:          32,
		Faults:        slices.Clone(Kinds),
		Schedule:      Mixed,
		Quarantine:    true,
		TTL:           time.Second,
		MasterTimeout: 100 * time.Millisecond,
		FaultInterval: time.Second,
		Work:          time.Millisecond,
		Unfenced:      0.5,
		ClockDrift:    0.005,
		ProgressEvery: 10 * time.Second,
		MaxListed:     20,
		Workloads:     []string{WorkloadMutex},
	}
}

// Validate checks the configuration; its errors are usage errors.
func (c *Config) Validate() error {
	switch {
	case c.Duration <= 0:
		return fmt.Errorf("--duration %v: want a positive duration", c.Duration)
	case c.Engines < 1 || c.Engines > 16:
		return fmt.Errorf("--engines %d: want 1 to 16", c.Engines)
	case c.Clients < 1 || c.Clients > 256:
		return fmt.Errorf("--clients %d: want 1 to 256", c.Clients)
	case c.Keys < 1 || c.Keys > 10000:
		return fmt.Errorf("--keys %d: want 1 to 10000", c.Keys)
	case c.TTL < 50*time.Millisecond || c.TTL > time.Minute:
		return fmt.Errorf("--ttl %v: want 50ms to 1m", c.TTL)
	case c.MasterTimeout <= 0 || c.MasterTimeout >= c.TTL/2:
		return fmt.Errorf("--master-timeout %v: want a positive duration below half the ttl", c.MasterTimeout)
	case c.FaultInterval < time.Millisecond:
		return fmt.Errorf("--fault-interval %v: want at least 1ms", c.FaultInterval)
	case c.Work < 0 || c.Work >= c.TTL/2:
		return fmt.Errorf("--work %v: want 0 or more, below half the ttl", c.Work)
	case c.QuarantinePeriod != 0 && c.QuarantinePeriod < c.TTL:
		return fmt.Errorf("--quarantine %v: want at least the ttl %v (the engine refuses a shorter one)", c.QuarantinePeriod, c.TTL)
	case !(c.Unfenced >= 0 && c.Unfenced <= 1):
		return fmt.Errorf("--unfenced %v: want a share from 0 to 1", c.Unfenced)
	case !(c.ClockDrift >= 0 && c.ClockDrift <= 10):
		return fmt.Errorf("--clock-drift %.4g%%: want 0%% to 1000%% (how much faster than real time the clock runs)", 100*c.ClockDrift)
	case !(c.LongShare >= 0 && c.LongShare <= 0.5):
		return fmt.Errorf("--long-share %v: want a share from 0 to 0.5", c.LongShare)
	case c.Tail < 0:
		return fmt.Errorf("--tail %v: want 0 (the default) or a positive duration", c.Tail)
	case c.MaxListed < 0:
		return fmt.Errorf("--max-listed %d: want 0 or more", c.MaxListed)
	case c.Schedule != Mixed && c.Schedule != SplitBrain:
		return fmt.Errorf("--schedule %q: want %s or %s", c.Schedule, Mixed, SplitBrain)
	}
	seen := map[string]bool{}
	for _, f := range c.Faults {
		if !slices.Contains(Kinds, f) && f != Reshard {
			return fmt.Errorf("--faults: unknown fault %q; want a comma-separated list of %v (or none)", f, Kinds)
		}
		if seen[f] {
			return fmt.Errorf("--faults: %q listed twice", f)
		}
		seen[f] = true
	}
	if err := c.validateWorkloads(); err != nil {
		return err
	}
	if err := c.validatePause(); err != nil {
		return err
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if c.Schedule == SplitBrain && !seen[Kill] {
		return fmt.Errorf("--schedule %s kills masters: include kill in --faults", SplitBrain)
	}
	return nil
}

func (c *Config) period() time.Duration {
	if c.QuarantinePeriod > 0 {
		return c.QuarantinePeriod
	}
	return c.TTL
}

func (c *Config) has(kind string) bool { return slices.Contains(c.Faults, kind) }

// Report is the outcome of a run, as `--json` prints it.
type Report struct {
	Seed          uint64   `json:"seed"`
	DurationS     float64  `json:"duration_s"`
	Schedule      string   `json:"schedule"`
	Quarantine    bool     `json:"quarantine"`
	QuarantineMS  float64  `json:"quarantine_ms,omitempty"`
	Masters       int      `json:"masters"`
	ClusterShards int      `json:"cluster_shards,omitempty"`
	Quorum        int      `json:"quorum"`
	Engines       int      `json:"engines"`
	Clients       int      `json:"clients"`
	Keys          int      `json:"keys"`
	Workloads     []string `json:"workloads,omitempty"`
	Unfenced      float64  `json:"unfenced"`
	ClockDrift    float64  `json:"clock_drift,omitempty"`
	TTLMS         float64  `json:"ttl_ms"`
	MasterTimeout float64  `json:"master_timeout_ms"`

	Grants       int64   `json:"grants"`
	GrantsPerSec float64 `json:"grants_per_sec"`
	Sections     int64   `json:"sections"`
	// Held is the grants by how the holder used them (short, long,
	// extended, overrun).
	Held map[string]int64 `json:"held"`
	// LockErrors counts failed Lock calls (each retried until its own
	// timeout) and failed Unlocks by kind.
	LockErrors   map[string]int64 `json:"lock_errors"`
	UnlockErrors map[string]int64 `json:"unlock_errors"`

	// Faults counts injections by kind; FaultDetail breaks them down.
	Faults      map[string]int64 `json:"faults"`
	FaultDetail map[string]int64 `json:"fault_detail"`
	// Resets are the moments the fencing precondition was broken on purpose
	// (a majority of masters lost their counters); tokens are not compared
	// across them.
	Resets int `json:"fence_resets"`

	// ClientPause is what the client-pause fault did (with that fault on).
	ClientPause *PauseReport `json:"client_pause,omitempty"`
	// KeysLeft is the end-of-run key check (keysleft.go); a key it finds is a
	// KeyLeft violation.
	KeysLeft *KeysReport `json:"keys_left,omitempty"`

	Violations Violations `json:"violations"`
	// Starved are the overruns explained by the holder's process being
	// starved of CPU (history.Starved): not violations, counted apart.
	Starved Violations `json:"starved_overruns"`
	// Events is the fault timeline on the history's timebase (the first
	// MaxEvents).
	Events []Event `json:"fault_events"`
}

// Event is one injected fault.
type Event struct {
	Kind   string        `json:"kind"`
	What   string        `json:"what"`
	At     time.Duration `json:"at"`
	Healed time.Duration `json:"healed,omitempty"`
}

// MaxEvents bounds the fault timeline kept in a report.
const MaxEvents = 100_000

// Violations is what the checker found.
type Violations struct {
	Count  int                 `json:"count"`
	ByKind map[string]int      `json:"by_kind"`
	List   []history.Violation `json:"list"` // the first MaxListed, overlaps first
}

// ErrSetup wraps errors that stop a run before it starts (no redis-server,
// masters never voting).
var ErrSetup = errors.New("torture setup failed")

// run is the state of one torture run.
type run struct {
	cfg     Config
	rw      rwState // the read-write workload's (rw.go)
	servers []*redisproc.Server
	proxies [][]*faultproxy.Proxy // [engine][master]; nil without proxy and address-flip faults
	// flipProxies are the client-pause workers' proxies ([worker][master]),
	// with address-flip on: an address flip must change what the address
	// reaches for every client, else the fault itself would be a split
	// brain (two servers answering for one master to different clients).
	flipProxies [][]*faultproxy.Proxy
	spares      []*redisproc.Server // address-flip's spare servers
	// sparesUp is when the spares started; flipped[m] is the spare master
	// m's address reaches ("" or nil: its own server); flipping: a flip is
	// in place.
	sparesUp time.Time
	flipped  []string
	flipping atomic.Bool
	links    [][]*faulty.Transport // [engine][master]
	engines  []*engine.Engine
	keys     []string
	fenced   []string // keys and semaphore slots: what the fence-reset check reads (initKeys)
	rec      *history.Recorder
	quorum   int
	probe    *probe      // this process's starvation probe (probe.go); nil: none
	quiet    atomic.Bool // the quiet tail runs (keysleft.go): short sections only

	holds chan holdEvent // long sections beginning, for targeted kills
	pz    *pauser        // client-pause workers and resource; nil without
	cl    *clusterRun    // cluster runs (Config.ClusterShards); nil without

	mu          sync.Mutex
	faults      map[string]int64
	detail      map[string]int64
	lockErrs    map[string]int64
	unlockErrs  map[string]int64
	held        map[string]int64
	sections    atomic.Int64
	events      []Event
	lastCounter []map[string]int64 // per master: counters last read since its last restart

	serverMu []sync.Mutex // serialises process faults per master
	faultWG  sync.WaitGroup
	unlocks  sync.WaitGroup
}

type holdEvent struct {
	key string
	at  time.Time
}

// Run runs one torture and returns its report. An error means the run could
// not be set up (wrapping ErrSetup) or ctx ended before it started.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &run{
		cfg:         cfg,
		quorum:      Masters/2 + 1,
		holds:       make(chan holdEvent, 1),
		faults:      map[string]int64{},
		detail:      map[string]int64{},
		lockErrs:    map[string]int64{},
		unlockErrs:  map[string]int64{},
		held:        map[string]int64{},
		lastCounter: make([]map[string]int64, Masters),
		serverMu:    make([]sync.Mutex, Masters),
	}
	for _, f := range cfg.Faults {
		r.faults[f] = 0
	}
	r.initKeys()
	defer r.teardown()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.waitVoting(ctx); err != nil {
		return nil, err
	}
	return r.execute(ctx)
}

// initKeys names the keys the mutex clients share, and every key a fenced
// grant can be recorded under (fenced): those and, with the semaphore
// workload, each semaphore's slot keys, whose permits are fenced locks too.
func (r *run) initKeys() {
	for i := range r.cfg.Keys {
		r.keys = append(r.keys, "torture:"+strconv.Itoa(i))
	}
	r.fenced = r.keys
	if slices.Contains(r.cfg.Workloads, WorkloadSemaphore) {
		r.fenced = slices.Clone(r.keys)
		for i := range semaphores {
			for s := range 1 + i%semMaxPermits {
				r.fenced = append(r.fenced, api.SemaphoreSlot("torture-sem:"+strconv.Itoa(i), s))
			}
		}
	}
}

func (r *run) setup(ctx context.Context) error {
	if r.cfg.ClusterShards > 0 {
		return r.setupCluster(ctx)
	}
	servers, err := redisproc.Start(ctx, Masters)
	if err != nil {
		return fmt.Errorf("%w: starting %d redis-server masters: %w", ErrSetup, Masters, err)
	}
	r.servers = servers
	if r.cfg.has(AddressFlip) {
		spares, err := redisproc.Start(ctx, r.quorum)
		if err != nil {
			return fmt.Errorf("%w: starting %d spare redis-servers: %w", ErrSetup, r.quorum, err)
		}
		r.spares, r.sparesUp = spares, time.Now()
	}
	for e := range r.cfg.Engines {
		addrs := make([]string, Masters)
		for m, s := range servers {
			addrs[m] = s.Addr
		}
		if r.cfg.has(Proxy) || r.cfg.has(AddressFlip) {
			row := make([]*faultproxy.Proxy, Masters)
			r.proxies = append(r.proxies, row)
			for m, s := range servers {
				p, err := faultproxy.New(s.Addr)
				if err != nil {
					return fmt.Errorf("%w: %w", ErrSetup, err)
				}
				row[m] = p
				addrs[m] = p.Addr()
			}
		}
		ts := make([]transport.Transport, Masters)
		row := make([]*faulty.Transport, Masters)
		for m, addr := range addrs {
			rt, err := redis.New(redis.Config{Addr: addr, OpTimeout: r.cfg.MasterTimeout})
			if err != nil {
				closeAll(ts[:m])
				return fmt.Errorf("%w: %w", ErrSetup, err)
			}
			row[m] = faulty.Wrap(rt, faulty.Config{Seed: r.cfg.Seed*1_000_003 + uint64(e*Masters+m)})
			ts[m] = row[m]
		}
		r.links = append(r.links, row)
		q := api.WithRestartQuarantine(r.cfg.period())
		if !r.cfg.Quarantine {
			q = api.WithoutRestartQuarantine()
		}
		opts := []api.Option{api.WithTTL(r.cfg.TTL), api.WithMasterTimeout(r.cfg.MasterTimeout), q, coordinators(e)}
		if r.cfg.EngineLog != nil {
			h := slog.NewTextHandler(r.cfg.EngineLog, &slog.HandlerOptions{Level: slog.LevelWarn})
			opts = append(opts, api.WithLogger(slog.New(h).With("engine", e+1)))
		}
		eng, err := engine.NewWithTransports(ts, opts...)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSetup, err)
		}
		r.engines = append(r.engines, eng)
	}
	return r.setupPause(ctx)
}

func closeAll(ts []transport.Transport) {
	for _, t := range ts {
		if t != nil {
			_ = t.Close()
		}
	}
}

// waitVoting waits until every engine can take a lock: the masters are
// fresh, so with the quarantine on they sit out their first period.
func (r *run) waitVoting(ctx context.Context) error {
	limit := r.cfg.period() + 10*time.Second
	deadline := time.Now().Add(limit)
	for e, eng := range r.engines {
		err := bench.WaitReady(ctx, bench.Engine(eng), "torture-probe:"+strconv.Itoa(e)+":", time.Until(deadline), nil)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("%w: engine %d could not take a lock within %v: %w", ErrSetup, e+1, limit, err)
		}
	}
	return r.waitWorkers(ctx)
}

// teardown heals everything, closes the engines, proxies and stops the
// servers. It runs on every exit path of Run.
func (r *run) teardown() {
	r.healAll()
	r.teardownPause()
	for _, e := range r.engines {
		_ = e.Close()
	}
	for _, row := range append(r.proxies, r.flipProxies...) {
		for _, p := range row {
			if p != nil {
				_ = p.Close()
			}
		}
	}
	redisproc.StopAll(r.servers)
	redisproc.StopAll(r.spares)
	r.stopCluster()
}

// healAll ends every fault in progress.
func (r *run) healAll() {
	r.healCluster()
	for i, s := range r.servers {
		r.serverMu[i].Lock()
		if s.Paused() {
			_ = s.Resume()
		}
		r.serverMu[i].Unlock()
	}
	for _, row := range r.links {
		for _, l := range row {
			l.Resume()
			l.Heal()
			l.SetLatency(0, 0)
			l.SetClockRate(1)
		}
	}
	for _, row := range r.proxies {
		for _, p := range row {
			if p != nil {
				p.Heal()
				p.SetDelay(0)
			}
		}
	}
}

func (r *run) execute(ctx context.Context) (*Report, error) {
	r.rec = history.NewRecorder()
	r.probe = startProbe(r.rec.Now, probePeriod, nil)
	defer r.probe.stop()
	runCtx, cancel := context.WithTimeout(ctx, r.cfg.Duration)
	defer cancel()
	start := time.Now()
	if err := r.startWorkers(); err != nil {
		return nil, err
	}

	var workers sync.WaitGroup
	for e, eng := range r.engines {
		for c := range r.cfg.Clients {
			workers.Go(func() { r.runClient(runCtx, eng, e, c) })
		}
	}
	var sched sync.WaitGroup
	faultCtx, stopFaults := context.WithCancel(runCtx)
	sched.Go(func() { r.schedule(faultCtx) })
	var prog sync.WaitGroup
	progCtx, stopProg := context.WithCancel(context.Background())
	if r.cfg.Progress != nil && r.cfg.ProgressEvery > 0 {
		prog.Go(func() { r.progress(progCtx, start) })
	}

	<-runCtx.Done()
	stopFaults()
	sched.Wait()
	r.faultWG.Wait()
	r.healAll() // cuts and partitions heal on their own timers; end them now
	workers.Wait()
	elapsed := time.Since(start)
	r.unlocks.Wait()
	r.stopWorkers()
	keys, left := r.quietTail(ctx)
	elapsed += time.Duration(keys.TailS * float64(time.Second)) // the tail's grants are counted too
	stopProg()
	prog.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	h := r.rec.History()
	vs := append(history.Check(h), left...)
	rep := r.report(h, vs, elapsed)
	rep.KeysLeft = keys
	rep.ClientPause = r.finishPause(h)
	rep.Starved = r.starved(h)
	return rep, nil
}

func (r *run) progress(ctx context.Context, start time.Time) {
	t := time.NewTicker(r.cfg.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.mu.Lock()
			f := maps.Clone(r.faults)
			r.mu.Unlock()
			fmt.Fprintf(r.cfg.Progress, "redlock torture: %v: %d grants, faults %v\n",
				time.Since(start).Round(time.Second), r.rec.Grants(), f)
		}
	}
}

// event records a fault on the timeline.
func (r *run) event(kind, what string, at, healed time.Duration) {
	r.mu.Lock()
	if len(r.events) < MaxEvents {
		r.events = append(r.events, Event{Kind: kind, What: what, At: at, Healed: healed})
	}
	r.mu.Unlock()
}

func (r *run) count(m map[string]int64, k string, n int64) {
	r.mu.Lock()
	m[k] += n
	r.mu.Unlock()
}

func (r *run) report(h history.History, vs []history.Violation, elapsed time.Duration) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &Report{
		Seed:          r.cfg.Seed,
		DurationS:     round(elapsed.Seconds(), 3),
		Schedule:      r.cfg.Schedule,
		Quarantine:    r.cfg.Quarantine,
		Masters:       Masters,
		ClusterShards: r.cfg.ClusterShards,
		Quorum:        r.quorum,
		Engines:       r.cfg.Engines,
		Clients:       r.cfg.Clients,
		Keys:          r.cfg.Keys,
		Workloads:     slices.Clone(r.cfg.Workloads),
		Unfenced:      r.cfg.Unfenced,
		TTLMS:         float64(r.cfg.TTL) / 1e6,
		MasterTimeout: float64(r.cfg.MasterTimeout) / 1e6,
		Grants:        int64(len(h.Grants)),
		Sections:      r.sections.Load(),
		Held:          maps.Clone(r.held),
		LockErrors:    maps.Clone(r.lockErrs),
		UnlockErrors:  maps.Clone(r.unlockErrs),
		Faults:        maps.Clone(r.faults),
		FaultDetail:   maps.Clone(r.detail),
		Resets:        len(h.Resets),
		Events:        slices.Clone(r.events),
	}
	if r.cfg.has(ClockDrift) {
		rep.ClockDrift = r.cfg.ClockDrift
	}
	if r.cfg.Quarantine {
		rep.QuarantineMS = float64(r.cfg.period()) / 1e6
	}
	if elapsed > 0 {
		rep.GrantsPerSec = round(float64(rep.Grants)/elapsed.Seconds(), 1)
	}
	rep.Violations.Count = len(vs)
	rep.Violations.ByKind = map[string]int{}
	for _, v := range vs {
		rep.Violations.ByKind[string(v.Kind)]++
	}
	// List the most telling first: overlaps, then the rest, earliest first.
	sorted := slices.Clone(vs)
	rank := map[history.Kind]int{history.Overlap: 0, history.GrantOverlap: 1, history.Overrun: 2, history.TokenOrder: 3}
	slices.SortStableFunc(sorted, func(a, b history.Violation) int {
		if c := cmp.Compare(rank[a.Kind], rank[b.Kind]); c != 0 {
			return c
		}
		return cmp.Compare(grantedAt(a), grantedAt(b))
	})
	n := min(len(sorted), r.cfg.MaxListed)
	rep.Violations.List = sorted[:n]
	if rep.Violations.List == nil {
		rep.Violations.List = []history.Violation{}
	}
	return rep
}

// grantedAt orders violations without a grant (KeyLeft) last.
func grantedAt(v history.Violation) time.Duration {
	if v.A == nil {
		return 1<<63 - 1
	}
	return v.A.GrantedAt
}

func round(x float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(x*p+0.5)) / p
}

// rngFor returns a generator for one stream of the run's seed.
func (r *run) rngFor(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(r.cfg.Seed, stream))
}

// coordinators gives the engines one and two coordinator shards in turn.
// The default is one on a machine of two cores, the one CI and most
// tortures run on; alternating keeps the paths between shards (a multi-key
// release waking waiters of another shard, calls routed by semaphore name)
// under the faults whatever the machine.
func coordinators(e int) api.Option { return api.WithCoordinators(1 + e%2) }
