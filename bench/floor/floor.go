// Package floor is the cheapest honest implementation of the engine's
// message pattern on protoactor-go, with no lock work: a lower bound on what
// any engine built to the design card (one node actor per master that queues
// ops and sends pipelined batches; coordinator actors, sharded by key, that
// fan each request out to every node actor and count the replies into a
// quorum decision) costs per lock cycle.
//
// A cycle is two rounds, as in the engine: an acquire (the caller is woken
// once a majority granted) and a release (woken once every master answered,
// as the engine's Unlock waits for every master). Each round: the caller
// sends one message to the coordinator of its key's shard and waits on a
// channel; the coordinator sends the same request to every node actor; a
// node actor queues what arrives and, when nothing of it is in flight, sends
// everything queued as one batch; the batch's answers go back to the
// coordinator in one message per batch and shard; the coordinator counts
// them and wakes the caller.
//
// What it leaves out, and the engine cannot: lock values, TTLs and the
// validity arithmetic, retries and backoff, cleanup of failed attempts,
// per-key order across batches in flight, deadlines, the restart
// quarantine, local wait queues, error reporting, lock handles, telemetry.
// Requests and reply messages are pooled, so a cycle allocates nothing of
// its own.
//
// Its knobs are the framework's choices that a design-card engine is free
// to make (Variant): the dispatchers, the mailbox, whether a batch goes to
// an I/O goroutine or is answered on the actor's own goroutine, and the
// transport (none: every op is granted at once; or a real one). The
// benchmark in package bench runs them side by side, and the cheapest is
// the floor.
package floor

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/quorumlock/redlock/transport"
)

// NodeMode is how a node actor gets a batch answered.
type NodeMode int

const (
	// Worker hands each batch to an I/O goroutine of the node over a
	// channel and takes the answers back as a message, with one batch in
	// flight per master: the engine's node. Needed for any transport that
	// waits on a network.
	Worker NodeMode = iota
	// SelfFlush queues ops and, on the first one queued, sends itself a
	// flush marker; the marker, behind every op already in the mailbox,
	// answers the whole queue as one batch on the actor's own goroutine.
	// No I/O goroutine and no hand-off: only possible when the transport
	// answers without waiting (none, or the in-memory masters).
	SelfFlush
	// PerOp answers every op at once in a reply of its own: no batching.
	PerOp
)

func (m NodeMode) String() string {
	switch m {
	case Worker:
		return "worker"
	case SelfFlush:
		return "selfflush"
	case PerOp:
		return "perop"
	}
	return fmt.Sprintf("NodeMode(%d)", int(m))
}

// Variant is one way of building the pattern with protoactor-go.
type Variant struct {
	// Coordinators is the number of coordinator shards. 0 means 2, the
	// engine's default when these variants were named; the engine now
	// defaults to 1 on one or two Ps (api.Options.Coordinators).
	Coordinators int
	// Node is how node actors answer batches.
	Node NodeMode
	// InlineCoordinator runs the coordinators on protoactor's synchronized
	// dispatcher (on the sender's goroutine when idle), instead of its
	// default dispatcher (a goroutine each time an idle mailbox gets a
	// message).
	InlineCoordinator bool
	// GoroutineNode runs the node actors on the default dispatcher instead
	// of the synchronized one (the engine's choice).
	GoroutineNode bool
	// Request fans out and replies with protoactor's Request (the message
	// in an envelope naming the sender) instead of Send.
	Request bool
	// ProtoMailbox uses protoactor's own unbounded mailbox instead of
	// the engine's kind (a mutex ring with the processing closure made
	// once; protoactor's allocates a closure per wake-up).
	ProtoMailbox bool
}

// Name is the variant's benchmark name.
func (v Variant) Name() string {
	s := v.Node.String()
	if v.InlineCoordinator {
		s += "-inlinecoord"
	}
	if v.GoroutineNode {
		s += "-gonode"
	}
	if v.ProtoMailbox {
		s += "-protombox"
	}
	if v.Request {
		s += "-request"
	}
	if v.Coordinators != 0 && v.Coordinators != 2 {
		s += fmt.Sprintf("-coords=%d", v.Coordinators)
	}
	return s
}

const maxCoordinators = 8

// ErrWait is returned for a cycle that asks to wait for a held lock: the
// skeleton has no retries, it measures uncontended cycles only.
var ErrWait = errors.New("floor: the skeleton runs uncontended cycles only (no retries)")

// Skeleton is a running set of coordinator and node actors. Its Cycle
// implements bench.Client.
type Skeleton struct {
	system *actor.ActorSystem
	root   *actor.RootContext
	coords []*actor.PID
	nodes  []*actor.PID
	quorum int
	wg     sync.WaitGroup
	seed   maphash.Seed
	pool   sync.Pool
}

// New starts a skeleton over ts, one transport per master. A nil transport
// grants every op at once. With SelfFlush or PerOp the node actor calls
// the transport on its own goroutine, which is only honest for a transport
// that never waits (the in-memory masters).
func New(ts []transport.Transport, v Variant) (*Skeleton, error) {
	if len(ts) == 0 || len(ts) > 64 {
		return nil, fmt.Errorf("floor: %d masters, need 1 to 64", len(ts))
	}
	if v.Coordinators <= 0 {
		v.Coordinators = 2
	}
	if v.Coordinators > maxCoordinators {
		return nil, fmt.Errorf("floor: %d coordinators, at most %d", v.Coordinators, maxCoordinators)
	}
	s := &Skeleton{
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
			// As the engine (actors.Start): a dead letter starts a goroutine
			// that lives this long; the default (1s) outlives Close.
			actor.WithDeadLetterThrottleInterval(10*time.Millisecond)),
		quorum: len(ts)/2 + 1,
		seed:   maphash.MakeSeed(),
	}
	s.root = s.system.Root
	s.pool.New = func() any { return &request{done: make(chan struct{}, 1)} }
	mbox := newMailbox
	if v.ProtoMailbox {
		mbox = actor.Unbounded()
	}
	coords := make([]*actor.PID, v.Coordinators)
	for i, t := range ts {
		n := &node{index: i, t: t, mode: v.Node, coords: coords, wg: &s.wg, request: v.Request, results: make([]transport.Result, 0, 64)}
		disp := actor.NewSynchronizedDispatcher(300)
		if v.GoroutineNode {
			disp = actor.NewDefaultDispatcher(300)
		}
		pid, err := s.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return n },
			actor.WithDispatcher(disp), actor.WithMailbox(mbox)), fmt.Sprintf("node-%d", i))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.nodes = append(s.nodes, pid)
	}
	for i := range coords {
		c := &coordinator{nodes: s.nodes, pool: &s.pool, request: v.Request}
		disp := actor.NewDefaultDispatcher(300)
		if v.InlineCoordinator {
			disp = actor.NewSynchronizedDispatcher(300)
		}
		pid, err := s.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return c },
			actor.WithDispatcher(disp), actor.WithMailbox(mbox)), fmt.Sprintf("coordinator-%d", i))
		if err != nil {
			s.Close()
			return nil, err
		}
		coords[i] = pid
		s.coords = append(s.coords, pid)
	}
	return s, nil
}

// Close stops every actor and I/O goroutine.
func (s *Skeleton) Close() {
	for _, pid := range append(append([]*actor.PID(nil), s.coords...), s.nodes...) {
		_ = s.root.PoisonFuture(pid).Wait()
	}
	s.wg.Wait()
	s.system.Shutdown()
}

// Cycle is one uncontended lock cycle: an acquire round and a release
// round. It returns an error if a majority did not grant or the release
// did not reach every master.
func (s *Skeleton) Cycle(ctx context.Context, key string, wait bool) error {
	if wait {
		return ErrWait
	}
	shard := int(maphash.String(s.seed, key) % uint64(len(s.coords)))
	granted, err := s.round(ctx, shard, transport.Op{Kind: transport.Acquire, Key: key, Value: "v", TTL: time.Minute}, s.quorum)
	if err != nil {
		return err
	}
	if granted < s.quorum {
		return fmt.Errorf("floor: acquire of %q granted by %d masters", key, granted)
	}
	granted, err = s.round(ctx, shard, transport.Op{Kind: transport.Release, Key: key, Value: "v"}, len(s.nodes))
	if err != nil {
		return err
	}
	if granted < s.quorum {
		return fmt.Errorf("floor: release of %q confirmed by %d masters", key, granted)
	}
	return nil
}

// round sends op through the coordinator and waits until wake answers
// came (wake grants, or too many refusals for it).
func (s *Skeleton) round(ctx context.Context, shard int, op transport.Op, wake int) (int, error) {
	r := s.pool.Get().(*request)
	r.op, r.wake, r.n, r.shard = op, wake, len(s.nodes), shard
	r.refs.Store(2) // the caller's and the coordinator's
	s.root.Send(s.coords[shard], r)
	select {
	case <-r.done:
	case <-ctx.Done():
		// The request is the coordinator's until it has every answer;
		// it goes back to the pool when the coordinator is done too.
		<-r.done
	}
	granted := r.result
	r.release(&s.pool)
	return granted, ctx.Err()
}

// request is one round: the caller fills op and wake; the coordinator
// owns the counts until the caller is woken, then until every master has
// answered.
type request struct {
	op      transport.Op
	wake    int // grants that wake the caller
	shard   int // the coordinator's
	n       int // masters
	granted int
	result  int // granted when the caller was woken: the caller's to read
	replied int
	woken   bool
	refs    atomic.Int32
	done    chan struct{}
}

func (r *request) release(pool *sync.Pool) {
	if r.refs.Add(-1) == 0 {
		r.op = transport.Op{}
		r.granted, r.result, r.replied, r.woken = 0, 0, 0, false
		pool.Put(r)
	}
}

// replies carries one node's answers to one coordinator for one batch.
type replies struct {
	reqs []*request
	ok   []bool
}

var repliesPool = sync.Pool{New: func() any { return &replies{} }}

type coordinator struct {
	nodes   []*actor.PID
	pool    *sync.Pool
	request bool
}

func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *replies:
		for i, r := range m.reqs {
			r.replied++
			if m.ok[i] {
				r.granted++
			}
			if !r.woken && (r.granted >= r.wake || r.replied-r.granted > r.n-r.wake) {
				r.woken, r.result = true, r.granted
				r.done <- struct{}{}
			}
			if r.replied == r.n {
				r.release(c.pool)
			}
		}
		clear(m.reqs)
		m.reqs, m.ok = m.reqs[:0], m.ok[:0]
		repliesPool.Put(m)
	case *request:
		for _, pid := range c.nodes {
			if c.request {
				ctx.Request(pid, m)
			} else {
				ctx.Send(pid, m)
			}
		}
	}
}

type node struct {
	index   int
	t       transport.Transport
	mode    NodeMode
	coords  []*actor.PID
	wg      *sync.WaitGroup
	request bool

	self     *actor.PID
	root     *actor.RootContext
	queue    []*request
	one      []*request // PerOp's batch of one
	inflight bool
	flushing bool
	work     chan *batch
	free     *batch
	ops      []transport.Op
	results  []transport.Result
}

// batch is one transport call's worth, out to the node's I/O goroutine.
type batch struct {
	reqs []*request
	ops  []transport.Op
	res  []transport.Result
}

type flushMsg struct{}

var flush = &flushMsg{}

func (n *node) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *request:
		switch n.mode {
		case PerOp:
			n.ops = append(n.ops[:0], m.op)
			n.results = n.apply(context.Background(), n.ops, n.results)
			n.one = append(n.one[:0], m)
			n.reply(ctx, n.one, n.results)
		case SelfFlush:
			n.queue = append(n.queue, m)
			if !n.flushing {
				n.flushing = true
				ctx.Send(n.self, flush)
			}
		default:
			n.queue = append(n.queue, m)
			if !n.inflight {
				n.send()
			}
		}
	case *flushMsg:
		n.flushing = false
		n.ops = n.ops[:0]
		for _, r := range n.queue {
			n.ops = append(n.ops, r.op)
		}
		n.results = n.apply(context.Background(), n.ops, n.results)
		n.reply(ctx, n.queue, n.results)
		clear(n.queue)
		n.queue = n.queue[:0]
	case *batch:
		n.inflight = false
		n.reply(ctx, m.reqs, m.res)
		clear(m.reqs)
		m.reqs, m.ops, m.res = m.reqs[:0], m.ops[:0], m.res[:0]
		n.free = m
		if len(n.queue) > 0 {
			n.send()
		}
	case *actor.Started:
		n.self = ctx.Self()
		n.root = ctx.ActorSystem().Root
		if n.mode == Worker {
			n.work = make(chan *batch, 1)
			n.free = &batch{}
			n.wg.Add(1)
			go n.worker()
		}
	case *actor.Stopping:
		if n.work != nil {
			close(n.work)
		}
	}
}

// send hands everything queued to the I/O goroutine as one batch.
func (n *node) send() {
	b := n.free
	n.free = nil
	b.reqs, n.queue = n.queue, b.reqs
	for _, r := range b.reqs {
		b.ops = append(b.ops, r.op)
	}
	n.inflight = true
	n.work <- b
}

func (n *node) worker() {
	defer n.wg.Done()
	ctx := new(batchContext)
	for b := range n.work {
		ctx.at = time.Now().Add(masterTimeout)
		b.res = n.apply(ctx, b.ops, b.res)
		n.root.Send(n.self, b)
	}
}

// masterTimeout is the deadline a batch carries (the engine's default
// master timeout).
const masterTimeout = 100 * time.Millisecond

// batchContext is the context of one batch, reused: a transport given a
// context without a deadline makes one per batch (context.WithTimeout: a
// timer and allocations), which the engine avoids with a reusable deadline
// of its own (actors/deadline.go). This one is cheaper still: it carries
// the deadline but no timer, so nothing wakes a batch whose master is
// silent. A real engine needs that timer; the floor leaves it out, which
// can only make the floor lower.
type batchContext struct{ at time.Time }

func (c *batchContext) Deadline() (time.Time, bool) { return c.at, true }
func (c *batchContext) Done() <-chan struct{}       { return nil }
func (c *batchContext) Err() error                  { return nil }
func (c *batchContext) Value(any) any               { return nil }

// apply answers ops: through the transport, or all granted without one.
func (n *node) apply(ctx context.Context, ops []transport.Op, res []transport.Result) []transport.Result {
	if cap(res) < len(ops) {
		res = make([]transport.Result, len(ops), 2*len(ops))
	}
	res = res[:len(ops)]
	if n.t == nil {
		for i := range res {
			res[i] = transport.Result{OK: true}
		}
		return res
	}
	if err := n.t.Do(ctx, ops, res); err != nil {
		for i := range res {
			if res[i].Err == nil {
				res[i].Err = err
			}
		}
	}
	return res
}

// reply sends the answers of one batch back, one message per coordinator
// that has requests in it.
func (n *node) reply(ctx actor.Context, reqs []*request, res []transport.Result) {
	if len(n.coords) == 1 {
		m := repliesPool.Get().(*replies)
		for i, r := range reqs {
			m.reqs = append(m.reqs, r)
			m.ok = append(m.ok, res[i].OK && res[i].Err == nil)
		}
		n.send1(ctx, n.coords[0], m)
		return
	}
	var byShard [maxCoordinators]*replies
	for i, r := range reqs {
		s := r.shard
		if byShard[s] == nil {
			byShard[s] = repliesPool.Get().(*replies)
		}
		byShard[s].reqs = append(byShard[s].reqs, r)
		byShard[s].ok = append(byShard[s].ok, res[i].OK && res[i].Err == nil)
	}
	for s, m := range byShard {
		if m != nil {
			n.send1(ctx, n.coords[s], m)
		}
	}
}

func (n *node) send1(ctx actor.Context, to *actor.PID, m *replies) {
	if n.request {
		ctx.Request(to, m)
	} else {
		ctx.Send(to, m)
	}
}
