package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// intake is how operations reach a node actor: the coordinators append
// them here, and the node takes everything that has arrived whenever it
// runs, instead of one mailbox delivery per op. A delivery costs about 400
// instructions (the mailbox's queue, its lock and state, protoactor's
// invoke path, the node's Receive) and there were ten per lock cycle, one
// per master for the SET and again for the release; an append under this
// lock costs a tenth of that.
//
// The node gets a mailbox message (wakeNode) only when it would not look
// at the intake otherwise: when it has room in flight and so waits for ops
// (wake set). While its batches are out, ops pile up here and the node
// takes them when a batch returns, which it handles anyway. So at 256
// lockers, where a node's worker is nearly always busy, the ops of a whole
// batch cost one lock each and no delivery.
//
// Order: every op for a node goes through its intake (coordinator.toNode),
// appended under the lock in the order the coordinator sends them and taken
// in that order, so the per-key order the node keeps (node.go) still
// starts from the send order. No op is stranded: the node leaves wake
// unset only while it will run again for a reason of its own (a batch in
// flight comes back as a message; a wakeNode posted is still to come), and
// it sets wake, under the lock, only after finding the intake empty.
type intake struct {
	mu   sync.Mutex
	ops  []*opRequest
	wake bool // the next add posts a wakeNode
}

// wakeNode tells a node that its intake has ops. One value serves every
// post: it carries nothing.
type wakeNode struct{}

var nodeWoken = &wakeNode{}

func newIntake() *intake { return &intake{wake: true} }

// add appends r and reports whether the caller must post a wakeNode.
func (in *intake) add(r *opRequest) (post bool) {
	in.mu.Lock()
	in.ops = append(in.ops, r)
	post, in.wake = in.wake, false
	in.mu.Unlock()
	return post
}

// len is the number of ops waiting in the intake (the queued gauge).
func (in *intake) len() int {
	if in == nil {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.ops)
}

// toNode sends r to node i.
func (c *coordinator) toNode(ctx actor.Context, i int, r *opRequest) {
	if c.intakes[i].add(r) {
		ctx.Send(c.nodes[i], nodeWoken)
	}
}

// take moves what the intake holds to the queue, flushes, and repeats until
// the intake is empty; then, if the node has room in flight (it would wait
// for ops), it asks the next add for a wake-up. The node calls it at the end
// of every message that can change what it may send.
func (n *node) take() {
	in := n.in
	for {
		in.mu.Lock()
		ops := in.ops
		if len(ops) == 0 {
			if n.inflight < n.maxInFlight {
				in.wake = true
			}
			in.mu.Unlock()
			return
		}
		in.ops = n.spare // swap the two slices: no allocation once grown
		in.mu.Unlock()
		n.queue = append(n.queue, ops...)
		clear(ops)
		n.spare = ops[:0]
		n.flush()
		n.m.queued(n.index, len(n.queue))
	}
}

// intake lets the queued gauge of master i count the ops in its intake,
// which wait there while a batch is in flight, as they waited in the node's
// queue before.
func (m *Metrics) intake(i int, in *intake) {
	if m != nil && i < len(m.nodes) {
		m.nodes[i].in.Store(in)
	}
}
