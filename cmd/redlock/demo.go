package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

func init() { register(newDemoCmd) }

// nodesEnv names the masters when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

// demoOptions configures one demo; see the flags for what each means.
type demoOptions struct {
	Nodes       []string // Redis masters; empty: Masters embedded in-memory masters
	Masters     int
	Products    int
	Stock       int
	Buyers      int
	Pick        string // "round-robin" or "random"
	Work        time.Duration
	TTL         time.Duration
	LockTimeout time.Duration
	Timeout     time.Duration
	JSON        bool
	Log         io.Writer // notices while the demo runs (stderr); nil: none

	// MasterTimeout bounds one master's answer (the engine's option); a
	// loaded machine needs more than the default to count no timeouts.
	MasterTimeout time.Duration
}

func defaultDemoOptions() demoOptions {
	return demoOptions{
		Masters:     5,
		Products:    8,
		Stock:       250,
		Buyers:      256,
		Pick:        "round-robin",
		Work:        5 * time.Microsecond,
		TTL:         5 * time.Second,
		LockTimeout: 10 * time.Second,
		Timeout:     time.Minute,

		MasterTimeout: api.DefaultOptions().MasterTimeout,
	}
}

func newDemoCmd() *cobra.Command {
	o := defaultDemoOptions()
	var nodes string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Oversell a small shop without the lock, then sell it exactly with it",
		Long: `demo runs a small shop twice: --buyers concurrent buyers keep buying one item
of one of --products products (each with --stock items) until everything is
sold. A purchase reads the stock, works a moment, then writes stock-1.

First without a lock: buyers that read the same stock both sell the item, and
the shop sells more than it had. Then with the lock: each purchase runs under
Lock("stock:<product>") ... Unlock, and nothing is oversold.

It needs no setup: without --nodes (or ` + nodesEnv + `) it runs on embedded
in-memory masters. Exit status: 0 when the locked run oversold nothing, 1 when
it did (a bug), 2 on a usage or setup error, 130 when interrupted.`,
		Example: `  # five embedded in-memory masters, no setup
  redlock demo

  # a smaller shop, as one JSON object
  redlock demo --buyers 64 --products 4 --stock 50 --json

  # five real Redis masters
  redlock demo --nodes 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379,10.0.0.4:6379,10.0.0.5:6379
  REDLOCK_NODES=redis://:secret@r1:6379,r2:6379,r3:6379 redlock demo`,
		Args: flagsOnly("demo"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			switch {
			case fl.Changed("nodes") && fl.Changed("masters"):
				return usagef("--nodes and --masters exclude each other: --masters counts embedded in-memory masters")
			case !fl.Changed("masters"):
				o.Nodes = masters(cmd, nodes)
			}
			if err := o.validate(); err != nil {
				return usageErr(err)
			}
			o.Log = cmd.ErrOrStderr()
			return demo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodes, "nodes", "", "comma-separated Redis masters ("+nodesForms+"); default $"+nodesEnv+", else embedded in-memory masters")
	f.IntVar(&o.Masters, "masters", o.Masters, "number of embedded in-memory masters (without --nodes)")
	f.IntVar(&o.Products, "products", o.Products, "number of products")
	f.IntVar(&o.Stock, "stock", o.Stock, "items in stock per product")
	f.IntVar(&o.Buyers, "buyers", o.Buyers, "concurrent buyers")
	f.StringVar(&o.Pick, "pick", o.Pick, "how buyers pick a product: round-robin or random")
	f.DurationVar(&o.Work, "work", o.Work, "time a purchase takes between reading and writing the stock")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock time to live")
	f.DurationVar(&o.MasterTimeout, "master-timeout", o.MasterTimeout, "bound on one master's answer (a batch waiting in a master's queue counts)")
	f.DurationVar(&o.LockTimeout, "lock-timeout", o.LockTimeout, "how long one Lock call may retry before the buyer counts an error and tries again")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "give up when the whole demo takes longer")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object instead of the report")
	f.SortFlags = false
	return cmd
}

// splitNodes splits a comma-separated master list, trimming spaces.
func splitNodes(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// maxItems bounds products*stock, so that a typo cannot start a demo that
// runs for hours.
const maxItems = 10_000_000

func (o *demoOptions) validate() error {
	switch {
	case len(o.Nodes) == 0 && (o.Masters < 1 || o.Masters > api.MaxMasters):
		return fmt.Errorf("--masters %d: want 1 to %d", o.Masters, api.MaxMasters)
	case o.Products < 1:
		return fmt.Errorf("--products %d: want at least 1", o.Products)
	case o.Stock < 1:
		return fmt.Errorf("--stock %d: want at least 1", o.Stock)
	case o.Buyers < 1:
		return fmt.Errorf("--buyers %d: want at least 1", o.Buyers)
	case o.Buyers > 100_000:
		return fmt.Errorf("--buyers %d: want at most 100000", o.Buyers)
	case int64(o.Products)*int64(o.Stock) > maxItems:
		return fmt.Errorf("--products %d × --stock %d is %d items: want at most %d", o.Products, o.Stock, int64(o.Products)*int64(o.Stock), maxItems)
	case o.Pick != "round-robin" && o.Pick != "random":
		return fmt.Errorf("--pick %q: want round-robin or random", o.Pick)
	case o.Work < 0:
		return fmt.Errorf("--work %v: want 0 or more", o.Work)
	case o.LockTimeout <= 0:
		return fmt.Errorf("--lock-timeout %v: want a positive duration", o.LockTimeout)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration", o.Timeout)
	case o.MasterTimeout <= 0:
		return fmt.Errorf("--master-timeout %v: want a positive duration", o.MasterTimeout)
	}
	return checkTTL(o.TTL)
}

// demoReport is the result of a demo, as --json prints it.
type demoReport struct {
	Backend  string       `json:"backend"` // "memory" or "redis"
	Masters  int          `json:"masters"`
	Quorum   int          `json:"quorum"`
	Buyers   int          `json:"buyers"`
	Products int          `json:"products"`
	Stock    int          `json:"stock"`
	Unlocked runReport    `json:"unlocked"`
	Locked   lockedReport `json:"locked"`

	masterNames []string
}

type runReport struct {
	Sold     int64 `json:"sold"`
	InStock  int64 `json:"in_stock"`
	Oversold int64 `json:"oversold"`
	// Overlaps counts purchases that began while another purchase of the
	// same product was under way.
	Overlaps  int64   `json:"overlaps"`
	ElapsedMS float64 `json:"elapsed_ms"`

	elapsed time.Duration
}

type lockedReport struct {
	runReport
	Cycles       int64       `json:"cycles"`
	CyclesPerSec float64     `json:"cycles_per_sec"`
	P50MS        float64     `json:"p50_ms"`
	P99MS        float64     `json:"p99_ms"`
	Errors       errorCounts `json:"errors"`

	p50, p99 time.Duration
}

// errorCounts counts failed Lock and Unlock calls by kind.
type errorCounts struct {
	NotAcquired       int64 `json:"not_acquired"`
	QuorumUnreachable int64 `json:"quorum_unreachable"`
	Other             int64 `json:"other"`

	samples [3]string // the first error of each kind
}

func (c *errorCounts) total() int64 { return c.NotAcquired + c.QuorumUnreachable + c.Other }

func (c *errorCounts) add(d errorCounts) {
	c.NotAcquired += d.NotAcquired
	c.QuorumUnreachable += d.QuorumUnreachable
	c.Other += d.Other
	for i, s := range d.samples {
		if c.samples[i] == "" {
			c.samples[i] = s
		}
	}
}

func (c *errorCounts) count(err error) {
	i := 2
	switch {
	case errors.Is(err, api.ErrNotAcquired):
		i, c.NotAcquired = 0, c.NotAcquired+1
	case errors.Is(err, api.ErrQuorumUnreachable):
		i, c.QuorumUnreachable = 1, c.QuorumUnreachable+1
	default:
		c.Other++
	}
	if c.samples[i] == "" {
		c.samples[i] = err.Error()
	}
}

var errDemoTimeout = errors.New("demo timed out")

// lockEngine is what the demo needs of *engine.Engine.
type lockEngine interface {
	api.Locker
	Masters() []string
	Quorum() int
	Options() api.Options
}

// openEngine starts the engine for o; tests replace it.
var openEngine = func(o demoOptions) (lockEngine, error) {
	if len(o.Nodes) > 0 {
		return engine.New(o.Nodes, api.WithTTL(o.TTL), api.WithMasterTimeout(o.MasterTimeout))
	}
	return engine.NewMemory(o.Masters, api.WithTTL(o.TTL), api.WithMasterTimeout(o.MasterTimeout))
}

// demo runs the shop without and with the lock and writes the report (or
// JSON) to w. It returns nil or an *exitError.
func demo(ctx context.Context, w io.Writer, o demoOptions) error {
	rep, err := runDemo(ctx, o)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(w)
		if err := enc.Encode(rep); err != nil {
			return &exitError{code: exitFailure, err: err}
		}
	} else {
		printReport(w, rep)
	}
	if n := rep.Locked.Oversold; n > 0 || rep.Locked.Overlaps > 0 {
		return &exitError{code: exitFailure, err: fmt.Errorf(
			"BUG: with the lock the shop oversold %d items and %d purchases overlapped: the lock did not exclude; please report this with the output above", n, rep.Locked.Overlaps)}
	}
	return nil
}

// runDemo starts the engine, runs both shops and closes the engine.
func runDemo(ctx context.Context, o demoOptions) (*demoReport, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, errDemoTimeout)
	defer cancel()

	backend := "memory"
	if len(o.Nodes) > 0 {
		backend = "redis"
	}
	eng, err := openEngine(o)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	defer eng.Close()

	rep := &demoReport{
		Backend:     backend,
		Masters:     len(eng.Masters()),
		Quorum:      eng.Quorum(),
		Buyers:      o.Buyers,
		Products:    o.Products,
		Stock:       o.Stock,
		masterNames: eng.Masters(),
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	if err := probe(ctx, eng, log); err != nil {
		need := fmt.Sprintf("a majority (%d of %d) of the masters must be up and answering", rep.Quorum, rep.Masters)
		last := strings.TrimPrefix(err.Error(), "redlock: ")
		if errors.Is(context.Cause(ctx), errDemoTimeout) {
			// Not the shop's size, which ended's message would blame:
			// no lock was taken yet.
			return nil, &exitError{code: exitFailure, err: fmt.Errorf("no lock within --timeout %v: %s (last error: %s)", o.Timeout, need, last)}
		}
		return nil, ended(ctx, o, err, &exitError{code: exitUsage, err: fmt.Errorf("cannot take a lock: %s: %s", need, last)})
	}

	un := newShop(o)
	un.run(ctx, nil)
	if ctx.Err() != nil {
		return nil, ended(ctx, o, ctx.Err(), nil)
	}
	rep.Unlocked = un.report()

	locked := newShop(o)
	locked.run(ctx, eng)
	if ctx.Err() != nil {
		return nil, ended(ctx, o, ctx.Err(), nil)
	}
	rep.Locked = locked.lockedReport()
	return rep, nil
}

// ended turns the end of ctx into the exit error to report; otherwise (ctx
// still live) it returns fallback.
func ended(ctx context.Context, o demoOptions, err error, fallback *exitError) error {
	switch {
	case errors.Is(context.Cause(ctx), errDemoTimeout):
		msg := fmt.Sprintf("the demo did not finish within --timeout %v: raise --timeout or make the shop smaller", o.Timeout)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			msg += " (last error: " + err.Error() + ")"
		}
		return &exitError{code: exitFailure, err: errors.New(msg)}
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	}
	return fallback
}

func (s *shop) report() runReport {
	var r runReport
	for p := range s.stock {
		r.Sold += s.sold[p].Load()
		r.InStock += s.stock[p].Load()
	}
	// Items sold beyond what existed: sold + left - what the shop had.
	r.Oversold = max(0, r.Sold+r.InStock-int64(s.o.Products)*int64(s.o.Stock))
	r.Overlaps = s.overlaps.Load()
	r.elapsed = s.elapsed
	r.ElapsedMS = ms(s.elapsed)
	return r
}

func (s *shop) lockedReport() lockedReport {
	r := lockedReport{runReport: s.report(), Cycles: int64(len(s.durations)), Errors: s.errs}
	if s.elapsed > 0 {
		r.CyclesPerSec = math.Round(float64(r.Cycles)/s.elapsed.Seconds()*10) / 10
	}
	slices.Sort(s.durations)
	r.p50, r.p99 = percentile(s.durations, 0.50), percentile(s.durations, 0.99)
	r.P50MS, r.P99MS = ms(r.p50), ms(r.p99)
	return r
}

// percentile is the nearest-rank q-quantile of sorted d.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func printReport(w io.Writer, r *demoReport) {
	where := fmt.Sprintf("%d embedded in-memory masters", r.Masters)
	if r.Backend != "memory" {
		where = fmt.Sprintf("%d Redis masters (%s)", r.Masters, strings.Join(r.masterNames, ", "))
	}
	fmt.Fprintf(w, "redlock demo: %d products × %d in stock, %d buyers, %s, quorum %d\n\n",
		r.Products, r.Stock, r.Buyers, where, r.Quorum)

	u, l := r.Unlocked, r.Locked
	rows := [][3]string{
		{"", "without the lock", "with the lock"},
		{"sold", num(u.Sold), num(l.Sold)},
		{"in stock", num(u.InStock), num(l.InStock)},
		{"oversold", num(u.Oversold), num(l.Oversold)},
		{"overlapping purchases", num(u.Overlaps), num(l.Overlaps)},
		{"elapsed", dur(u.elapsed), dur(l.elapsed)},
		{"lock cycles/s", "-", num(int64(math.Round(l.CyclesPerSec)))},
		{"cycle p50", "-", dur(l.p50)},
		{"cycle p99", "-", dur(l.p99)},
		{"lock errors", "-", num(l.Errors.total())},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "  %-22s %18s %15s\n", row[0], row[1], row[2])
	}
	if l.Errors.total() > 0 {
		e := l.Errors
		fmt.Fprintf(w, "  %-22s not acquired %d, quorum unreachable %d, other %d\n", "", e.NotAcquired, e.QuorumUnreachable, e.Other)
		for _, s := range e.samples {
			if s != "" {
				fmt.Fprintf(w, "  %-22s e.g. %s\n", "", s)
			}
		}
	}
	fmt.Fprintln(w)

	total := int64(r.Products) * int64(r.Stock)
	if u.Oversold > 0 {
		books := ""
		if u.InStock > 0 {
			books = fmt.Sprintf(", and the inventory still shows %s in stock", num(u.InStock))
		}
		fmt.Fprintf(w, "without the lock: %s oversold: %s sales of %s items%s; buyers that read the same stock each sold the item\n",
			num(u.Oversold), num(u.Sold), num(total), books)
	} else {
		fmt.Fprintf(w, "without the lock: this time the race was missed and nothing was oversold (%d overlapping purchases); more --buyers or a longer --work widen the window\n",
			u.Overlaps)
	}
	if l.Oversold > 0 || l.Overlaps > 0 {
		fmt.Fprintf(w, "with the lock: %s OVERSOLD across %s sales, %d overlapping purchases (%d masters, quorum %d): THIS IS A BUG\n",
			num(l.Oversold), num(l.Sold), l.Overlaps, r.Masters, r.Quorum)
		return
	}
	fmt.Fprintf(w, "with the lock: 0 oversold across %s sales (%d masters, quorum %d)\n", num(l.Sold), r.Masters, r.Quorum)
}

// num formats n with thousands separators.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dur formats d with three significant digits or so.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
