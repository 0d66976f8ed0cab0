package actors

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
)

// errStale fails an acquire that waited in the queue past its attempt's
// deadline (see coordinator.queueLimit): sending it would only take a key
// that must be released again. The coordinator retries such an attempt
// rather than report healthy masters as unreachable. It also fails an
// extension still queued at its lock's validity end (expires.go), which
// could no longer keep the lock: behind one slow batch of a short-TTL lock,
// that is the round trip the error's headline already blames.
var errStale = errors.New("timed out waiting in the node's queue")

// node is the actor of one master. It queues operations and, whenever fewer
// than maxInFlight batches are out, sends everything queued as one batch
// from a goroutine of its own, so the mailbox never waits on the network.
//
// Per-key order: ops in one batch are applied in order by the transport, and
// an op whose key is already in a batch in flight stays queued until that
// batch returns. So a release can never overtake the SET it cleans up, even
// with several batches in flight.
type node struct {
	index       int
	t           transport.Transport
	timeout     time.Duration
	maxBatch    int
	maxInFlight int
	coords      []*actor.PID
	// coordMBs are the coordinators' mailboxes and mb the node's own
	// (post), filled by Start before any call; nil in tests that build a
	// node by hand, which then sends through protoactor.
	coordMBs []*mailbox
	mb       *mailbox
	wg       *sync.WaitGroup

	self     *actor.PID
	root     *actor.RootContext
	queue    []*opRequest
	inflight int
	busy     []uint32 // keys in batches in flight, by hash (only when maxInFlight > 1)
	work     chan *batch
	free     []*batch
	drained  []chan struct{}
	outbox   []*nodeReplies // per-shard reply messages, scratch for deliver
	q        *quarantine
	m        *Metrics
	in       *intake      // where the coordinators' ops arrive (intake.go)
	spare    []*opRequest // the intake's other slice, swapped in by take

	// immediate: the transport's Do never waits (transport.Immediate), so
	// a batch of lone calls' ops runs on the goroutine that flushes it
	// (flush), under here, the deadline kept for that.
	immediate bool
	here      *deadline

	// silentSince: the send of the first batch that timed out since the
	// master last answered; zero while it answers (slow.go).
	silentSince time.Time

	// What a panic would lose (restart.go): cur, the message being
	// handled, and counted, whether (a returned batch) its slot in flight
	// and key marks were given back; finishing and releasing, the parked
	// batches being passed on.
	cur       any
	counted   bool
	finishing *batch
	releasing []*batch
}

// batch is one Do call's worth of work; it is also the message the I/O
// goroutine sends back when the batch returns.
type batch struct {
	reqs  []*opRequest
	ops   []transport.Op
	res   []transport.Result
	epoch uint64 // the transport's epoch around Do (see quarantine)
	// served: which shard gave each result, when the quarantine is per
	// shard (see shards).
	served []transport.Served
	// sent is when the batch left the node's queue for its I/O worker
	// (flush), after any wait in the queue and just before the transport
	// gets it: no master can have applied its ops earlier, so a grant's
	// validity counts from here (admission control: overload is latency).
	// The batch round-trip metric reads it too, and so includes the
	// hand-over to the worker.
	sent time.Time
	// metered: the metrics saw the batch leave (Metrics.sending), so they
	// count its return.
	metered bool
}

// drainMsg asks a node to close done once its queue is empty and nothing is
// in flight.
type drainMsg struct{ done chan struct{} }

func (n *node) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *opRequest:
		// Coordinators send ops through the intake (coordinator.toNode),
		// never as messages: an op sent here could pass one of theirs still
		// in the intake, so per-key send order would not hold across both.
		n.queue = append(n.queue, m)
		n.flush()
		n.m.queued(n.index, len(n.queue))
	case *batch:
		n.handling(m)
		n.inflight--
		if n.busy != nil {
			n.mark(m, ^uint32(0)) // -1
		}
		n.counted = true
		if !n.q.park(n, m) {
			n.finish(m)
		}
		n.flush()
		n.take()
		n.checkDrained()
	case *wakeNode:
		n.handling(m)
		n.take()
	case *drainMsg:
		n.handling(m)
		n.drained = append(n.drained, m.done)
		n.take()
		n.checkDrained()
	case *infoResult:
		n.handling(m)
		n.q.learn(n, m)
		n.take()
		n.checkDrained()
	case *infoTick:
		n.q.check(n)
	case *actor.Stopping:
		n.q.stop()
		close(n.work)
		if n.here != nil {
			n.here.timer.Stop()
		}
	case *actor.Restarting:
		n.recoverLost()
	case *actor.Started:
		if n.work != nil {
			n.restarted() // after a panic: keep workers and timers (restart.go)
			break
		}
		n.self = ctx.Self()
		n.root = ctx.ActorSystem().Root
		n.q.start(n, ctx)
		if n.maxInFlight > 1 {
			n.busy = make([]uint32, busySlots)
		}
		n.outbox = make([]*nodeReplies, len(n.coords))
		// Long-lived I/O goroutines, one per batch allowed in flight: a
		// channel hand-off is cheaper than a goroutine per batch.
		n.work = make(chan *batch, n.maxInFlight)
		n.wg.Add(n.maxInFlight)
		for range n.maxInFlight {
			go n.worker()
		}
	}
	n.cur = nil
}

// busySlots counts keys in flight by hash. A collision only holds an op
// back until the other batch returns, which costs a little latency and
// never reorders: per-key order needs "no key of this op is in flight",
// and a false "in flight" errs on the safe side.
const busySlots = 1 << 12

// mark adds delta (1 or -1 as uint32) to the in-flight count of every key
// of b.
func (n *node) mark(b *batch, delta uint32) {
	for i, r := range b.reqs {
		if len(b.ops[i].Keys) == 0 {
			n.busy[r.hash%busySlots] += delta
			continue
		}
		for _, k := range b.ops[i].Keys {
			n.busy[keyHash(k)%busySlots] += delta
		}
	}
}

func (n *node) isBusy(r *opRequest) bool {
	if len(r.op.Keys) == 0 {
		return n.busy[r.hash%busySlots] > 0
	}
	for _, k := range r.op.Keys {
		if n.busy[keyHash(k)%busySlots] > 0 {
			return true
		}
	}
	return false
}

// worker is a node's I/O goroutine. On an immediate master it yields the
// processor once before each batch goes back to the node (do's yield): Do
// returns there in well under a microsecond, before the callers and
// coordinators that are already runnable have added the ops that belong in
// the next batch, so without the yield the node sent the next batch with
// the few ops that had arrived and the worker parked, to be woken for the
// next op. At 256 lockers on the memory masters that was 13 ops a batch,
// 0.75 batches and 0.36 parks of a worker a cycle; with the yield, 60 ops,
// 0.17 batches and 0.04-0.05 parks (BENCHMARKS.md, "Twenty-second session").
// With nothing else runnable, the yield returns at once. A batch that
// waits on the network needs none: its callers run meanwhile.
func (n *node) worker() {
	defer n.wg.Done()
	var d *deadline
	for b := range n.work {
		if d == nil {
			d = newDeadline()
		}
		if !n.do(b, d, n.immediate) {
			d = nil
		}
	}
	if d != nil {
		d.timer.Stop()
	}
}

// finish vets a returned batch's grants, routes its results and recycles it.
func (n *node) finish(b *batch) {
	unsent(b)
	n.hear(b)
	n.q.vet(n, b)
	n.m.returned(n.index, b, len(n.queue))
	n.answering(b)
	n.deliver(b.reqs, b.res, b.sent)
	n.recycle(b)
}

func (n *node) checkDrained() {
	if len(n.queue) == 0 && n.inflight == 0 && (n.q == nil || len(n.q.parked) == 0) {
		for _, d := range n.drained {
			close(d)
		}
		n.drained = n.drained[:0]
	}
}

// flush sends queued ops while there is room in flight.
func (n *node) flush() {
	for n.inflight < n.maxInFlight && len(n.queue) > 0 {
		b := n.batch()
		// One clock read per batch serves the stale check and the
		// batch's send time (do): read before the batch is handed over,
		// it is no later than the send, so a validity counted from it is
		// never longer than one counted from the send (sent).
		now := time.Now()
		keep := n.queue[:0]
		lone := n.immediate
		for i, r := range n.queue {
			if len(b.reqs) == n.maxBatch {
				keep = append(keep, n.queue[i:]...)
				break
			}
			if n.busy != nil && n.isBusy(r) {
				keep = append(keep, r)
				continue
			}
			if expires(r) {
				if now.After(r.deadline) {
					n.fail(r, errStale)
					continue
				}
			}
			b.reqs = append(b.reqs, r)
			b.ops = append(b.ops, r.op)
			lone = lone && r.lone
		}
		clear(n.queue[len(keep):])
		n.queue = keep
		if len(b.reqs) == 0 {
			n.recycle(b)
			return
		}
		if n.busy != nil {
			n.mark(b, 1)
		}
		if cap(b.res) < len(b.ops) {
			b.res = make([]transport.Result, len(b.ops), cap(b.ops))
		}
		b.res = b.res[:len(b.ops)]
		b.sent = now
		n.m.sending(n.index, b, len(n.queue))
		n.inflight++
		if lone {
			n.doHere(b)
			continue
		}
		n.work <- b // never blocks: at most maxInFlight batches are out
	}
}

// doHere runs b, every op of which is a lone call's (opRequest.lone), on
// this goroutine: the actor's, which is the goroutine of whoever woke the
// node (node actors run on their senders', see Start), and for a lone call
// that is the caller's. The transport is immediate, so nothing here waits.
// A lone call has no other ops to batch with, and the hand-off to an I/O
// goroutine and back was most of its cost: a goroutine woken to run Do,
// and another for the batch's return. The batch still comes back as a
// message (do's back), queued behind the one being handled, so everything
// after the send (finish, the key marks, the slot in flight) happens as
// for a batch an I/O goroutine ran.
//
// It does not yield as an immediate master's worker does: a lone call has
// no ops coming to wait for, and a yield on the caller's goroutine cost a
// quarter to nearly half of the cycles at one locker when it was tried.
//
// Calls that are not alone keep the I/O goroutines: their ops pile up in
// the intake while a batch is out, so each batch carries many; run here,
// every op would go out in a batch of its own on the coordinator's
// goroutine, which then does the nodes' work too (at 256 lockers that
// made a cycle cost three times the CPU).
func (n *node) doHere(b *batch) {
	if n.here == nil {
		n.here = newDeadline()
	}
	if !n.do(b, n.here, false) {
		n.here = nil // ended, or left to a transport that panicked: not reused
	}
}

// do runs on an I/O goroutine: the only place that waits on the master. It
// sends b through the transport under d and reports whether d may be armed
// again. With yield, it lets other goroutines run before b goes back to the
// node (worker says why).
func (n *node) do(b *batch, d *deadline, yield bool) (reuse bool) {
	defer n.back(b, yield)
	defer func() {
		// A user's transport must not take the engine down with it.
		if p := recover(); p != nil {
			transport.Fail(b.res, fmt.Errorf("transport panicked: %v", p))
			reuse = false // what the transport left running is anyone's guess
		}
	}()
	d.armAt(b.sent, n.timeout)
	defer func() { reuse = d.disarm() }()
	b.epoch = n.q.epoch()
	defer func() {
		if e := n.q.epoch(); e != b.epoch {
			b.epoch = ^uint64(0) // served (partly) by a new connection: unvetted
		}
	}()
	if err := n.q.do(d, n.t, b); err != nil {
		// The contract says Do has set every Err already; a transport that
		// forgot must not turn an unknown outcome into a "no".
		for i := range b.res {
			if b.res[i].Err == nil {
				b.res[i] = transport.Result{Err: err}
			}
		}
	}
	return
}

func (n *node) fail(r *opRequest, err error) {
	if r.reply {
		m := getReplies(n.index)
		m.items = append(m.items, reply{req: r, res: transport.Result{Err: err}})
		n.toCoord(r.shard, m)
	}
}

// toCoord sends m to the coordinator of shard.
func (n *node) toCoord(shard int32, m *nodeReplies) {
	if n.coordMBs != nil {
		post(n.coordMBs[shard], m)
		return
	}
	n.root.Send(n.coords[shard], m)
}

// back hands a batch that returned from the transport back to the node,
// after yielding the processor if asked to.
func (n *node) back(b *batch, yield bool) {
	if yield {
		runtime.Gosched()
	}
	if n.mb != nil {
		post(n.mb, b)
		return
	}
	n.root.Send(n.self, b)
}

// deliver routes results back, one message per coordinator shard. Every
// message is filled before the first goes out: once a coordinator has its
// replies it may recycle their requests (reqpool.go), so the node must not
// read a request of any shard after a Send.
func (n *node) deliver(reqs []*opRequest, res []transport.Result, sent time.Time) {
	out := n.outbox
	for i, r := range reqs {
		if !r.reply {
			continue
		}
		m := out[r.shard]
		if m == nil {
			m = getReplies(n.index)
			m.sent = sent
			out[r.shard] = m
		}
		m.items = append(m.items, reply{req: r, res: res[i]})
	}
	for shard, m := range out {
		if m != nil {
			out[shard] = nil
			n.toCoord(int32(shard), m)
		}
	}
}

func (n *node) batch() *batch {
	if k := len(n.free); k > 0 {
		b := n.free[k-1]
		n.free = n.free[:k-1]
		return b
	}
	return &batch{}
}

func (n *node) recycle(b *batch) {
	clear(b.reqs)
	clear(b.ops)
	clear(b.res)
	b.reqs, b.ops, b.res = b.reqs[:0], b.ops[:0], b.res[:0]
	b.sent, b.metered = time.Time{}, false
	n.free = append(n.free, b)
}
