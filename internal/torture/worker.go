package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/engine"
)

// The worker side of the client-pause fault: one engine in a process of its
// own (the parent runs `redlock torture-worker`, or a test binary in worker
// mode), whose clients loop Lock -> write to the protected resource ->
// Unlock and report every grant, section and write to the parent as JSON
// lines on stdout.
//
// Times in the lines are CLOCK_MONOTONIC nanoseconds: one clock for every
// process on the machine, unlike the monotonic reading of Go's time.Time,
// which only compares within one process. Times the engine hands out as
// time.Time (Lock.Until) are converted through a pairing of the two clocks
// taken at start.
//
// The parent talks on stdin, one word a line:
//
//	start  begin the clients
//	arm    the next client to get a lock announces it ("about") once it
//	       has checked its lock is valid, and waits for go before writing:
//	       the parent stops the process (SIGSTOP) in that gap
//	go     the announced client writes, whatever the time
//	stop   stop the clients, report ("done") and exit
//
// End of input is stop.

// resourceScript is the protected resource's write, per key: with fencing
// (ARGV[3] == "1") it refuses a token below the largest it has accepted;
// every accepted write gets the key's next sequence number, the resource's
// own order of what it stored. Reply: {accepted, seq, largest token seen
// before this write}.
const resourceScript = `
local max = tonumber(redis.call('HGET', KEYS[1], 'max') or '0')
local tok = tonumber(ARGV[1])
if ARGV[3] == '1' and tok < max then return {0, 0, max} end
if tok > max then redis.call('HSET', KEYS[1], 'max', ARGV[1]) end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[1], 'holder', ARGV[2])
return {1, seq, max}
`

var resourceWrite = radix.NewEvalScript(resourceScript)

// resourceKey is the resource's record of one lock key.
func resourceKey(key string) string { return "resource:" + key }

// workerLine is one line a worker writes.
type workerLine struct {
	Ev string `json:"ev"` // ready, about, grant, done, error

	Key        string `json:"key,omitempty"`
	Holder     string `json:"holder,omitempty"`
	Token      int64  `json:"token,omitempty"`
	GrantedAt  int64  `json:"granted_at,omitempty"` // CLOCK_MONOTONIC ns, as every time below
	ValidUntil int64  `json:"valid_until,omitempty"`
	Released   bool   `json:"released,omitempty"`
	ReleasedAt int64  `json:"released_at,omitempty"`
	Ran        bool   `json:"ran,omitempty"`
	Start      int64  `json:"start,omitempty"`
	End        int64  `json:"end,omitempty"`
	Signaled   bool   `json:"signaled,omitempty"`
	Due        int64  `json:"due,omitempty"`       // when the section's timer was due (history.Grant.Due)
	StallDue   int64  `json:"stall_due,omitempty"` // the starvation probe's evidence (history.Grant.StallDue)
	StallRan   int64  `json:"stall_ran,omitempty"`
	// Armed: this client announced itself (about) and waited for go.
	Armed bool         `json:"armed,omitempty"`
	Write *workerWrite `json:"write,omitempty"`

	// done
	LockErrors   map[string]int64 `json:"lock_errors,omitempty"`
	UnlockErrors map[string]int64 `json:"unlock_errors,omitempty"`
	WriteErrors  int64            `json:"write_errors,omitempty"`
	Msg          string           `json:"msg,omitempty"`
}

type workerWrite struct {
	Sent     int64 `json:"sent"`
	Acked    int64 `json:"acked"`
	Accepted bool  `json:"accepted"`
	Seq      int64 `json:"seq,omitempty"`
	Seen     int64 `json:"seen,omitempty"`
}

// workerConfig is a worker's command line.
type workerConfig struct {
	id            int
	masters       []string
	resource      string
	keys          []string
	clients       int
	ttl           time.Duration
	masterTimeout time.Duration
	quarantine    time.Duration // 0: off
	fencing       bool
	seed          uint64
	work          time.Duration
}

func (c *workerConfig) args() []string {
	return []string{
		"-id", strconv.Itoa(c.id),
		"-masters", strings.Join(c.masters, ","),
		"-resource", c.resource,
		"-keys", strings.Join(c.keys, ","),
		"-clients", strconv.Itoa(c.clients),
		"-ttl", c.ttl.String(),
		"-master-timeout", c.masterTimeout.String(),
		"-quarantine", c.quarantine.String(),
		"-fencing=" + strconv.FormatBool(c.fencing),
		"-seed", strconv.FormatUint(c.seed, 10),
		"-work", c.work.String(),
	}
}

func parseWorker(args []string, stderr io.Writer) (*workerConfig, error) {
	var c workerConfig
	var masters, keys string
	fs := flag.NewFlagSet("torture-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.id, "id", 1, "worker number, for holder names")
	fs.StringVar(&masters, "masters", "", "comma-separated master addresses")
	fs.StringVar(&c.resource, "resource", "", "the protected resource's address")
	fs.StringVar(&keys, "keys", "", "comma-separated lock keys")
	fs.IntVar(&c.clients, "clients", 4, "clients")
	fs.DurationVar(&c.ttl, "ttl", time.Second, "lock ttl")
	fs.DurationVar(&c.masterTimeout, "master-timeout", 100*time.Millisecond, "master timeout")
	fs.DurationVar(&c.quarantine, "quarantine", time.Second, "restart quarantine period (0: off)")
	fs.BoolVar(&c.fencing, "fencing", true, "lock with fencing tokens; the resource refuses older tokens")
	fs.Uint64Var(&c.seed, "seed", 1, "seed")
	fs.DurationVar(&c.work, "work", time.Millisecond, "longest section after the write")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.masters = strings.Split(masters, ",")
	c.keys = strings.Split(keys, ",")
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case masters == "" || keys == "" || c.resource == "":
		return nil, errors.New("-masters, -keys and -resource are required")
	case c.clients < 1:
		return nil, fmt.Errorf("-clients %d: want at least 1", c.clients)
	}
	return &c, nil
}

// WorkerMain runs a client-pause worker with the command line args, talking
// to its parent over stdin and stdout, and returns the exit status: 0 after
// stop, 2 on a bad command line, 1 when it could not run.
func WorkerMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseWorker(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "torture-worker: %v\n", err)
		return 2
	}
	w := &worker{cfg: cfg, out: json.NewEncoder(stdout), goCh: make(chan struct{}, 1),
		lockErrs: map[string]int64{}, unlockErrs: map[string]int64{}}
	if err := w.run(ctx, stdin, stderr); err != nil {
		w.emit(workerLine{Ev: "error", Msg: err.Error()})
		fmt.Fprintf(stderr, "torture-worker %d: %v\n", cfg.id, err)
		return 1
	}
	return 0
}

type worker struct {
	cfg *workerConfig
	eng *engine.Engine
	res radix.Client
	clk monoCal
	prb *probe // the process's starvation probe, on CLOCK_MONOTONIC ns

	outMu sync.Mutex
	out   *json.Encoder

	armed atomic.Bool
	goCh  chan struct{}

	mu          sync.Mutex
	lockErrs    map[string]int64
	unlockErrs  map[string]int64
	writeErrors atomic.Int64
	unlocks     sync.WaitGroup
}

func (w *worker) emit(l workerLine) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	_ = w.out.Encode(l) // a parent that stopped reading has stopped the run
}

func (w *worker) count(m map[string]int64, k string) {
	w.mu.Lock()
	m[k]++
	w.mu.Unlock()
}

func (w *worker) run(ctx context.Context, stdin io.Reader, stderr io.Writer) error {
	clk, err := calibrate()
	if err != nil {
		return err
	}
	w.clk = clk
	w.prb = startProbe(func() time.Duration { return time.Duration(w.clk.now()) }, probePeriod, nil)
	defer w.prb.stop()
	// Commands from the parent; the clients stop on stop or end of input.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	started := make(chan struct{})
	var startOnce sync.Once
	go func() {
		defer stop()
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "start":
				startOnce.Do(func() { close(started) })
			case "arm":
				w.armed.Store(true)
			case "go":
				select {
				case w.goCh <- struct{}{}:
				default:
				}
			case "stop":
				return
			}
		}
	}()

	q := api.WithRestartQuarantine(w.cfg.quarantine)
	if w.cfg.quarantine == 0 {
		q = api.WithoutRestartQuarantine()
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", w.cfg.id)
	w.eng, err = engine.New(w.cfg.masters, api.WithTTL(w.cfg.ttl), api.WithMasterTimeout(w.cfg.masterTimeout), q, api.WithLogger(logger))
	if err != nil {
		return err
	}
	defer w.eng.Close()
	w.res, err = (radix.PoolConfig{Size: w.cfg.clients}).New(ctx, "tcp", w.cfg.resource)
	if err != nil {
		return fmt.Errorf("connecting to the resource %s: %w", w.cfg.resource, err)
	}
	defer w.res.Close()
	if err := w.probe(ctx); err != nil {
		return err
	}
	w.emit(workerLine{Ev: "ready"})
	select {
	case <-started:
	case <-ctx.Done():
		return nil
	}
	var clients sync.WaitGroup
	for c := range w.cfg.clients {
		clients.Go(func() { w.client(ctx, c) })
	}
	clients.Wait()
	w.unlocks.Wait()
	w.mu.Lock()
	done := workerLine{Ev: "done", LockErrors: w.lockErrs, UnlockErrors: w.unlockErrs, WriteErrors: w.writeErrors.Load()}
	w.mu.Unlock()
	w.emit(done)
	return nil
}

// probe waits until the engine can take a lock (fresh masters sit out
// their first quarantine).
func (w *worker) probe(ctx context.Context) error {
	limit := w.cfg.quarantine + 10*time.Second
	err := bench.WaitReady(ctx, bench.Engine(w.eng), "torture-probe:w"+strconv.Itoa(w.cfg.id)+":", limit, nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("could not take a lock within %v: %w", limit, err)
	}
	return nil
}

// client loops Lock -> write -> short section -> Unlock until ctx ends, and
// reports each grant when its section is over.
func (w *worker) client(ctx context.Context, c int) {
	rng := rand.New(rand.NewPCG(w.cfg.seed, uint64(0x3000+w.cfg.id)<<32|uint64(c)))
	holder := "w" + strconv.Itoa(w.cfg.id) + "/c" + strconv.Itoa(c+1)
	opts := []api.LockOption{api.WithFencing(w.cfg.fencing)}
	for ctx.Err() == nil {
		key := w.cfg.keys[rng.IntN(len(w.cfg.keys))]
		var (
			l   api.Lock
			err error
		)
		if rng.IntN(2) == 0 {
			l, err = w.eng.TryLock(ctx, key, opts...)
		} else {
			lctx, cancel := context.WithTimeout(ctx, w.cfg.ttl/5)
			l, err = w.eng.Lock(lctx, key, opts...)
			cancel()
		}
		if err != nil {
			if ctx.Err() == nil {
				w.count(w.lockErrs, classify(err))
			}
			continue
		}
		g := workerLine{Ev: "grant", Key: key, Holder: holder, Token: l.Token(), GrantedAt: w.clk.now(), ValidUntil: w.clk.mono(l.Until())}
		w.section(ctx, l, rng, &g)
		g.Released, g.ReleasedAt = true, w.clk.now()
		w.unlocks.Go(func() {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.Unlock(uctx); err != nil && ctx.Err() == nil {
				w.count(w.unlockErrs, classify(err))
			}
		})
		w.emit(g)
	}
}

// section acts only while the lock is vouched for, as a careful holder
// does: it checks Done and the deadline, then writes. An armed client
// announces itself between the check and the write, where a GC pause
// would hit: the parent stops the process there.
func (w *worker) section(ctx context.Context, l api.Lock, rng *rand.Rand, g *workerLine) {
	done := l.Done()
	if !vouched(l, done) {
		return
	}
	g.Ran, g.Start = true, w.clk.now()
	if w.armed.CompareAndSwap(true, false) {
		g.Armed = true
		w.emit(workerLine{Ev: "about", Key: g.Key, Holder: g.Holder, Token: g.Token, GrantedAt: g.GrantedAt, ValidUntil: g.ValidUntil})
		select {
		case <-w.goCh:
		case <-ctx.Done():
			g.End = w.clk.now()
			return
		}
	}
	g.Write = w.write(ctx, g)
	if w.cfg.work > 0 {
		g.Due = int64(work(done, time.Duration(rng.Int64N(int64(w.cfg.work)+1)), func() time.Duration { return time.Duration(w.clk.now()) }))
	} else {
		g.Due = w.clk.now()
	}
	g.End = w.clk.now()
	g.Signaled = closed(done)
	if !g.Signaled {
		if d, ran, ok := w.prb.stallEvidence(time.Duration(w.clk.mono(l.Until())), time.Duration(g.End), time.Duration(g.Due)); ok {
			g.StallDue, g.StallRan = int64(d), int64(ran)
		}
	}
}

// write sends one write to the resource; nil when it failed (its outcome
// unknown: the parent reconciles with the resource's own count).
func (w *worker) write(ctx context.Context, g *workerLine) *workerWrite {
	fence := "0"
	if w.cfg.fencing {
		fence = "1"
	}
	var reply []int64
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	out := &workerWrite{Sent: w.clk.now()}
	err := w.res.Do(wctx, resourceWrite.Cmd(&reply, []string{resourceKey(g.Key)}, strconv.FormatInt(g.Token, 10), g.Holder, fence))
	out.Acked = w.clk.now()
	if err != nil || len(reply) != 3 {
		w.writeErrors.Add(1)
		return nil
	}
	out.Accepted, out.Seq, out.Seen = reply[0] == 1, reply[1], reply[2]
	return out
}
