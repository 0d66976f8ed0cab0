// Package faulty wraps any transport.Transport and injects the faults of a
// bad link to its master, deterministically from a seed:
//
//   - Latency: every batch waits a fixed delay plus a uniform jitter before
//     it is sent. A caller whose context ends during the wait gets an error
//     and the batch is not applied.
//   - Dropped replies: the batch IS applied, but an op's result says Err.
//     This is the dangerous case a timed-out SET stands for: the engine
//     must not treat it as "not taken" (transport contract), and must clean
//     it up. Random (Config.DropRate) or all replies for a while
//     (DropReplies: a one-way partition).
//   - Partitions: the master is unreachable for a while; Do fails at once
//     with transport.ErrUnavailable and nothing is applied (Partition, or
//     at random with Config.FailRate).
//   - Pauses: Do is held until Resume or until its context ends, like a
//     master stopped with SIGSTOP. A batch whose caller gave up is still
//     applied on Resume, in arrival order, before anything sent later: a
//     paused master processes the commands queued on its socket when it
//     continues, and a release sent after a timed-out SET can never
//     overtake it.
//   - Lost fence write-backs (LoseFences): RaiseFence ops are not sent, so
//     never applied, and their results say Err, while the batch's other ops
//     go through; the write-back of a token reaches some masters and not
//     others.
//   - A fast clock (SetClockRate): the TTL of every Acquire, AcquireFenced
//     and Extend is divided by the rate (rounded down to whole
//     milliseconds) on its way to the master, which then expires the key as
//     early as a master whose clock runs that much fast would.
//
// Random draws come from a math/rand/v2 PCG seeded with Config.Seed, one
// generator per Transport, so the same seed and the same sequence of calls
// give the same faults. With every fault off the wrapper is transparent:
// it passes the conformance suite (transporttest), and so does its View
// around a transport that lacks some optional interfaces (below).
//
// The optional interfaces (ServerReporter, Namer, Capabler) are delegated to
// the wrapped transport; ServerInfo suffers the same partitions, pauses and
// latency as Do. View returns a transport.Transport that implements exactly
// the optional interfaces the wrapped one does. Give the engine the View
// when the wrapped transport is no ServerReporter or no Namer: a *Transport
// implements both whatever it wraps, so the engine would read no server
// info from it (its master would never vote, in restart quarantine) and
// would see one name, "faulty", for every such master (and refuse them as
// one master given twice).
package faulty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/transport"
)

// ErrReplyLost is the Err of an op that was applied but whose reply was
// dropped.
var ErrReplyLost = errors.New("faulty: reply lost (the op was applied)")

// ErrFenceLost is the Err of a RaiseFence op that LoseFences kept from the
// master.
var ErrFenceLost = errors.New("faulty: fence write-back lost (not applied)")

// drainTimeout bounds the Do of a held batch applied on Resume after its
// caller gave up.
const drainTimeout = 5 * time.Second

// Config sets the random faults of a Transport. The zero value injects
// nothing.
type Config struct {
	// Seed seeds the fault generator; wrap each master with a different
	// seed to get different (but reproducible) faults per master.
	Seed uint64
	// Latency is added to every batch, plus a uniform draw in [0, Jitter).
	Latency, Jitter time.Duration
	// DropRate is the share of ops (0 to 1) that are applied but whose
	// reply is lost.
	DropRate float64
	// FailRate is the share of batches (0 to 1) that fail fast without
	// being applied, as on a flaky link.
	FailRate float64
}

func (c Config) validate() error {
	switch {
	case c.Latency < 0 || c.Jitter < 0:
		return fmt.Errorf("faulty: latency %v and jitter %v must be >= 0", c.Latency, c.Jitter)
	case !(c.DropRate >= 0 && c.DropRate <= 1):
		return fmt.Errorf("faulty: drop rate %v must be in [0, 1]", c.DropRate)
	case !(c.FailRate >= 0 && c.FailRate <= 1):
		return fmt.Errorf("faulty: fail rate %v must be in [0, 1]", c.FailRate)
	}
	return nil
}

// Stats counts the faults a Transport injected.
type Stats struct {
	Batches     int64 // Do calls
	Delayed     int64 // batches that waited for added latency
	Dropped     int64 // ops applied whose reply was lost
	Partitioned int64 // batches failed fast, not applied
	Held        int64 // batches held by a pause
	Abandoned   int64 // held batches whose caller gave up (applied on Resume)
	FencesLost  int64 // RaiseFence ops kept from the master
	Scaled      int64 // ops whose TTL a clock rate shortened or lengthened
}

// Transport is a transport with injected faults. It is safe for concurrent
// use.
type Transport struct {
	inner transport.Transport

	mu        sync.Mutex
	rng       *rand.Rand
	cfg       Config
	partUntil time.Time
	dropUntil time.Time
	fenceLoss time.Time // RaiseFence ops are lost until then
	clockRate float64   // 0 or 1: the master's clock keeps time
	paused    bool
	draining  bool
	queue     []*job
	closed    bool
	closedCh  chan struct{}
	errClosed error

	wg sync.WaitGroup // the drain goroutine

	batches, delayed, dropped, partitioned, held, abandoned, fencesLost, scaled atomic.Int64
}

// job is a batch held by a pause.
type job struct {
	ops  []transport.Op
	res  []transport.Result
	srv  []transport.Served // nil unless sent by DoServed
	err  error
	done chan struct{}
}

var (
	_ transport.Transport      = (*Transport)(nil)
	_ transport.ServerReporter = (*Transport)(nil)
	_ transport.Namer          = (*Transport)(nil)
	_ transport.Capabler       = (*Transport)(nil)
)

// Wrap returns t with the faults of cfg. The wrapper owns t: Close closes
// it. It panics on an invalid cfg (a negative latency, a rate outside
// [0, 1]): fault schedules are code, not input.
func Wrap(t transport.Transport, cfg Config) *Transport {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return &Transport{
		inner:     t,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		cfg:       cfg,
		closedCh:  make(chan struct{}),
		errClosed: fmt.Errorf("faulty: %w", transport.ErrClosed),
	}
}

// Inner returns the wrapped transport.
func (t *Transport) Inner() transport.Transport { return t.inner }

// Stats returns the fault counters.
func (t *Transport) Stats() Stats {
	return Stats{
		Batches: t.batches.Load(), Delayed: t.delayed.Load(), Dropped: t.dropped.Load(),
		Partitioned: t.partitioned.Load(), Held: t.held.Load(), Abandoned: t.abandoned.Load(),
		FencesLost: t.fencesLost.Load(), Scaled: t.scaled.Load(),
	}
}

// SetLatency sets the added latency of later batches: latency plus a
// uniform draw in [0, jitter).
func (t *Transport) SetLatency(latency, jitter time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg.Latency, t.cfg.Jitter = max(latency, 0), max(jitter, 0)
}

// SetDropRate sets the share of ops whose reply is lost after being applied.
func (t *Transport) SetDropRate(p float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg.DropRate = min(max(p, 0), 1)
}

// SetFailRate sets the share of batches that fail fast, unapplied.
func (t *Transport) SetFailRate(p float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg.FailRate = min(max(p, 0), 1)
}

// Partition makes the master unreachable for d from now (extending a
// partition in progress if it would end sooner): Do, Ping and ServerInfo
// fail at once with transport.ErrUnavailable, and nothing is applied.
func (t *Transport) Partition(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end := time.Now().Add(d); end.After(t.partUntil) {
		t.partUntil = end
	}
}

// DropReplies loses every reply for d from now: ops are applied, their
// results say Err (a one-way partition: requests arrive, replies do not).
func (t *Transport) DropReplies(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end := time.Now().Add(d); end.After(t.dropUntil) {
		t.dropUntil = end
	}
}

// LoseFences keeps every RaiseFence op from the master for d from now
// (extending a period in progress if it would end sooner): the op is not
// sent, so never applied, and its result says ErrFenceLost. The batch's
// other ops are sent as usual, in their order.
func (t *Transport) LoseFences(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end := time.Now().Add(d); end.After(t.fenceLoss) {
		t.fenceLoss = end
	}
}

// SetClockRate models a master whose clock runs rate times as fast as real
// time (1.3: 30% fast; 1 or 0: keeps time): the TTL of every later Acquire,
// AcquireFenced and Extend is divided by rate and rounded down to whole
// milliseconds (at least 1ms), so the master expires the key when its fast
// clock says the TTL has passed. A rate below 1 is a slow clock.
func (t *Transport) SetClockRate(rate float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clockRate = max(rate, 0)
}

// ScaleTTL is the TTL a master whose clock runs rate times as fast as real
// time is given for ttl: ttl/rate rounded down to whole milliseconds, at
// least 1ms; ttl itself for a rate of 0 or 1.
func ScaleTTL(ttl time.Duration, rate float64) time.Duration {
	if rate <= 0 || rate == 1 {
		return ttl
	}
	ms := int64(float64(ttl.Milliseconds()) / rate)
	return time.Duration(max(ms, 1)) * time.Millisecond
}

// Heal ends a partition, a DropReplies period and a LoseFences period now.
func (t *Transport) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partUntil, t.dropUntil, t.fenceLoss = time.Time{}, time.Time{}, time.Time{}
}

// Pause holds every later Do, Ping and ServerInfo until Resume (or until
// the caller's context ends; the batch is then still applied on Resume).
func (t *Transport) Pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = true
}

// Paused reports whether the transport is paused.
func (t *Transport) Paused() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.paused
}

// Resume ends a pause: the held batches are applied in arrival order, then
// later ones.
func (t *Transport) Resume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.paused {
		return
	}
	t.paused = false
	t.startDrainLocked()
}

func (t *Transport) startDrainLocked() {
	if t.draining || len(t.queue) == 0 || t.closed {
		return
	}
	t.draining = true
	t.wg.Add(1)
	go t.drain()
}

// drain applies the held batches one at a time, in order, until the queue
// is empty, the transport is paused again or closed.
func (t *Transport) drain() {
	defer t.wg.Done()
	for {
		t.mu.Lock()
		if t.paused || t.closed || len(t.queue) == 0 {
			t.draining = false
			t.mu.Unlock()
			return
		}
		j := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		j.err = t.innerDo(ctx, j.ops, j.res, j.srv)
		cancel()
		close(j.done)
	}
}

// plan is what the faults decided for one call.
type plan struct {
	delay     time.Duration
	fail      error   // fail fast, unapplied
	drop      bool    // lose every reply
	loseFence bool    // keep RaiseFence ops from the master
	clockRate float64 // divide TTLs by it (0 or 1: leave them)
}

// decide draws the faults of one call. It also returns the drop rate, for
// the per-op draws after the call.
func (t *Transport) decide() (plan, float64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return plan{}, 0, t.errClosed
	}
	var p plan
	now := time.Now()
	switch {
	case now.Before(t.partUntil):
		p.fail = fmt.Errorf("%w: faulty: partitioned for another %v", transport.ErrUnavailable, t.partUntil.Sub(now).Round(time.Millisecond))
	case t.cfg.FailRate > 0 && t.rng.Float64() < t.cfg.FailRate:
		p.fail = fmt.Errorf("%w: faulty: link failed", transport.ErrUnavailable)
	}
	if p.fail != nil {
		return p, 0, nil
	}
	p.delay = t.cfg.Latency
	if t.cfg.Jitter > 0 {
		p.delay += time.Duration(t.rng.Int64N(int64(t.cfg.Jitter)))
	}
	p.drop = now.Before(t.dropUntil)
	p.loseFence = now.Before(t.fenceLoss)
	p.clockRate = t.clockRate
	return p, t.cfg.DropRate, nil
}

// wait sleeps d or until ctx ends or the transport closes.
func (t *Transport) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t.delayed.Add(1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("faulty: waiting out added latency: %w", ctx.Err())
	case <-t.closedCh:
		return t.errClosed
	}
}

// Do applies ops on the wrapped transport, with the faults.
func (t *Transport) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	return t.do(ctx, ops, results, nil)
}

// do is Do, and DoServed when served is not nil (see sharded.go).
func (t *Transport) do(ctx context.Context, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	t.batches.Add(1)
	p, dropRate, err := t.decide()
	if err != nil {
		return transport.Fail(results, err)
	}
	if p.fail != nil {
		t.partitioned.Add(1)
		return transport.Fail(results, p.fail)
	}
	if err := t.wait(ctx, p.delay); err != nil {
		return transport.Fail(results, err)
	}
	if err := t.applyAltered(ctx, p, ops, results, served); err != nil {
		return err
	}
	// Replies lost after the fact: the ops were applied.
	// (An op the master refused as malformed keeps its own error.)
	if p.drop {
		for i := range results {
			if results[i].Err == nil {
				results[i] = transport.Result{Err: ErrReplyLost}
				t.dropped.Add(1)
			}
		}
		return nil
	}
	if dropRate > 0 {
		t.mu.Lock()
		for i := range results {
			if results[i].Err == nil && t.rng.Float64() < dropRate {
				results[i] = transport.Result{Err: ErrReplyLost}
				t.dropped.Add(1)
			}
		}
		t.mu.Unlock()
	}
	return nil
}

// applyAltered applies the batch as the plan's lost fences and clock rate
// change it: lost RaiseFence ops are left out (their results say
// ErrFenceLost) and TTLs are scaled. Without either it is apply, with no
// copy.
func (t *Transport) applyAltered(ctx context.Context, p plan, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	alter := p.clockRate > 0 && p.clockRate != 1
	if p.loseFence {
		alter = alter || slices.ContainsFunc(ops, func(op transport.Op) bool { return op.Kind == transport.RaiseFence })
	}
	if !alter {
		return t.apply(ctx, ops, results, served)
	}
	sent := make([]transport.Op, 0, len(ops))
	index := make([]int, 0, len(ops)) // sent[j] is ops[index[j]]
	for i, op := range ops {
		if p.loseFence && op.Kind == transport.RaiseFence {
			results[i] = transport.Result{Err: ErrFenceLost}
			t.fencesLost.Add(1)
			continue
		}
		switch op.Kind {
		case transport.Acquire, transport.AcquireFenced, transport.Extend,
			transport.AcquireShared, transport.ExtendShared, transport.AcquireExclusive:
			// An op Check rejects (a TTL that is not whole milliseconds)
			// is passed on as it is, for the master to reject.
			if transport.Check(&op) == nil {
				if ttl := ScaleTTL(op.TTL, p.clockRate); ttl != op.TTL {
					op.TTL = ttl
					t.scaled.Add(1)
				}
			}
		}
		sent = append(sent, op)
		index = append(index, i)
	}
	if len(sent) == 0 {
		return nil
	}
	res := make([]transport.Result, len(sent))
	var srv []transport.Served
	if served != nil {
		srv = make([]transport.Served, len(sent))
	}
	err := t.apply(ctx, sent, res, srv)
	for j, i := range index {
		results[i] = res[j]
		if served != nil {
			served[i] = srv[j]
		}
	}
	return err
}

// apply sends the batch to the wrapped transport, or, while paused (or
// while a Resume is still applying held batches), queues it behind them and
// waits for it, for ctx, or for Close.
func (t *Transport) apply(ctx context.Context, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return transport.Fail(results, t.errClosed)
	}
	if !t.paused && !t.draining {
		t.mu.Unlock()
		return t.innerDo(ctx, ops, results, served)
	}
	j := &job{ops: slices.Clone(ops), res: make([]transport.Result, len(ops)), done: make(chan struct{})}
	if served != nil {
		j.srv = make([]transport.Served, len(ops))
	}
	t.held.Add(1)
	t.queue = append(t.queue, j)
	t.startDrainLocked() // no-op while paused
	t.mu.Unlock()
	select {
	case <-j.done:
		copy(results, j.res)
		copy(served, j.srv)
		return j.err
	case <-ctx.Done():
		// The master will still apply it when it continues.
		t.abandoned.Add(1)
		return transport.Fail(results, fmt.Errorf("faulty: master paused: %w", ctx.Err()))
	case <-t.closedCh:
		return transport.Fail(results, t.errClosed)
	}
}

// gate applies partitions, latency and pauses to a call that is not a batch
// (Ping, ServerInfo). A paused master answers them once resumed.
func (t *Transport) gate(ctx context.Context) error {
	p, _, err := t.decide()
	if err != nil {
		return err
	}
	if p.fail != nil {
		return p.fail
	}
	if err := t.wait(ctx, p.delay); err != nil {
		return err
	}
	if p.drop {
		return ErrReplyLost
	}
	for {
		t.mu.Lock()
		if !t.paused && !t.draining {
			t.mu.Unlock()
			return nil
		}
		t.mu.Unlock()
		// Polling keeps the pause state simple; the calls it gates are rare
		// (health and info checks).
		select {
		case <-ctx.Done():
			return fmt.Errorf("faulty: master paused: %w", ctx.Err())
		case <-t.closedCh:
			return t.errClosed
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Close fails held and later calls with transport.ErrClosed (held batches
// are never applied), waits for the wrapper's goroutine and closes the
// wrapped transport. It is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.closedCh)
	t.queue = nil
	t.mu.Unlock()
	t.wg.Wait()
	return t.inner.Close()
}

// ServerInfo delegates to the wrapped transport's, through the faults. A
// wrapped transport that is no ServerReporter answers an error wrapping
// errors.ErrUnsupported (use View to hide the method instead).
func (t *Transport) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	sr, ok := t.inner.(transport.ServerReporter)
	if !ok {
		return transport.ServerInfo{}, fmt.Errorf("faulty: wrapped transport reports no server info: %w", errors.ErrUnsupported)
	}
	if err := t.gate(ctx); err != nil {
		return transport.ServerInfo{}, err
	}
	return sr.ServerInfo(ctx)
}

// Epoch delegates to the wrapped transport's; 0 (never changes) for one
// that is no ServerReporter.
func (t *Transport) Epoch() uint64 {
	if sr, ok := t.inner.(transport.ServerReporter); ok {
		return sr.Epoch()
	}
	return 0
}

// Capabilities are the wrapped transport's: the wrapper adds no op and
// takes none away, so answering none for a wrapped minimal transport is the
// same as not implementing transport.Capabler, and View need not hide it.
func (t *Transport) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(t.inner)
}

// Name delegates to the wrapped transport's; without one it is "faulty"
// (see View).
func (t *Transport) Name() string {
	if n, ok := t.inner.(transport.Namer); ok {
		return n.Name()
	}
	return "faulty"
}

// View returns t as a transport.Transport that implements exactly the
// optional interfaces (ServerReporter, Namer) of the wrapped transport, so
// that the engine treats the wrapped master as it would treat it unwrapped.
// (Every view has Capabilities, which answers none for a wrapped transport
// that declares none, the same as lacking the method.) For transports that
// implement both (Redis, memory) t itself is the same.
func (t *Transport) View() transport.Transport {
	b := base{t}
	_, server := t.inner.(transport.ServerReporter)
	_, named := t.inner.(transport.Namer)
	switch {
	case !server && !named:
		return struct{ base }{b}
	case server && !named:
		return struct {
			base
			reporter
		}{b, reporter{t}}
	case !server && named:
		return struct {
			base
			name
		}{b, name{t}}
	}
	return t
}

// The pieces View assembles; each holds the wrapper under its own field
// name so that embedding several of them leaves no ambiguous method.
type (
	base     struct{ t *Transport }
	reporter struct{ tr *Transport }
	name     struct{ tn *Transport }
)

func (b base) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	return b.t.Do(ctx, ops, results)
}
func (b base) Close() error { return b.t.Close() }

// Capabilities is on every view: it answers none for a wrapped transport
// that declares none, which is what lacking the method means.
func (b base) Capabilities() transport.Capabilities { return b.t.Capabilities() }
func (r reporter) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	return r.tr.ServerInfo(ctx)
}
func (r reporter) Epoch() uint64 { return r.tr.Epoch() }
func (n name) Name() string      { return n.tn.Name() }
