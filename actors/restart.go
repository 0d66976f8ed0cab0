package actors

import (
	"errors"
	"slices"

	"github.com/quorumlock/redlock/transport"
)

// A panic in a node's Receive is a bug of ours, or of a user's meter, which
// the node calls as a batch returns (a transport's panics are recovered on
// the worker, node.do). protoactor then restarts the node:
// the actor gets Restarting and Started again, with the same *node, and the
// message that panicked is lost. The node keeps what it holds (queue,
// intake, batches in flight on its workers, parked batches, the per-key
// marks of those batches), so a restart only has to
//
//   - leave its workers, their channel and the quarantine's timer alone:
//     Started makes them once (a second set would leave the first waiting
//     on a channel nobody sends to, and Close waiting for them);
//   - take the intake, whose ops a lost wake-up was to fetch;
//   - answer for the lost message (recoverLost): a returned batch's ops are
//     failed with errNodeRestarted, a drain is registered, an INFO read
//     counts as failed.
//
// What the node cannot tell is which of a batch's replies already went
// out once it started sending them; it never answers an op twice (the
// coordinators count answers, a second one could make a majority that is
// not), so a panic there, or in the middle of its queue's bookkeeping
// (take, flush), is not covered (SAFETY.md, "Node restart after a panic").

// errNodeRestarted fails the ops of a returned batch whose node panicked
// before it passed their results on: the master may have applied them, so
// the outcome is unknown, as after a timeout.
var errNodeRestarted = errors.New("the node actor restarted after a panic before it passed this op's result on: outcome unknown")

// testNodeHook, when set (tests only; nil in production), runs as a node
// starts to handle a message that carries work it owes an answer for: a
// returned batch, a wake-up, a drain, an INFO result. A test makes it panic
// to restart the node on the real path (restart_test.go).
var testNodeHook func(n *node, msg any)

// handling is where a node starts on such a message: until Receive returns
// it is the message a panic would lose.
func (n *node) handling(msg any) {
	n.cur, n.counted = msg, false
	if testNodeHook != nil {
		testNodeHook(n, msg)
	}
}

// answering is called as b's results start to go out: from here a panic
// must not answer them again.
func (n *node) answering(b *batch) {
	if n.cur == any(b) {
		n.cur = nil
	}
	if n.finishing == b {
		n.finishing = nil
	}
}

// finishAll passes on parked batches that the quarantine released, one at a
// time, so that a panic leaves the rest findable (recoverLost).
func (n *node) finishAll(bs []*batch) {
	n.releasing = bs
	for len(n.releasing) > 0 {
		b := n.releasing[0]
		n.releasing = n.releasing[1:]
		n.finishing = b
		n.finish(b)
	}
	n.releasing = nil
}

// recoverLost answers for what a panic lost (see handling). It runs at
// Restarting, before Started.
func (n *node) recoverLost() {
	lost, fin, rest := n.cur, n.finishing, n.releasing
	// Out first: should this panic too, nothing is answered twice.
	n.cur, n.finishing, n.releasing = nil, nil, nil
	// Released parked batches not passed on yet: failed rather than vetted
	// again, in case vetting is what panicked.
	if fin != nil {
		n.failLost(fin, true)
	}
	for _, b := range rest {
		n.failLost(b, true)
	}
	switch m := lost.(type) {
	case *batch:
		if m != fin && (n.q == nil || !slices.Contains(n.q.parked, m)) {
			n.failLost(m, n.counted) // a parked one waits for its read
		}
	case *drainMsg:
		if !slices.Contains(n.drained, m.done) {
			n.drained = append(n.drained, m.done)
		}
	case *infoResult:
		// Unknown is not trusted: as a read that failed, which releases
		// the batches parked for it with their grants unvetted (failed).
		r := *m
		r.err = errNodeRestarted
		n.q.learn(n, &r)
	}
}

// failLost answers the ops of b, a returned batch lost before its results
// went out, with errNodeRestarted, and gives back its slot in flight and
// its key marks unless the node had already (counted).
func (n *node) failLost(b *batch, counted bool) {
	if !counted {
		n.inflight--
		if n.busy != nil {
			n.mark(b, ^uint32(0)) // -1
		}
	}
	if n.q != nil && n.q.shards != nil {
		delete(n.q.shards.needs, b) // not vetted: nothing of it counts as a vote
		delete(n.q.shards.waits, b)
	}
	for i := range b.res {
		b.res[i] = transport.Result{Err: errNodeRestarted}
	}
	n.m.returned(n.index, b, len(n.queue))
	n.deliver(b.reqs, b.res, b.sent)
	n.recycle(b)
}

// restarted is Started after a restart: the workers and timers of the
// first Started still run; fetch what waits in the intake and finish a
// drain that now has nothing left.
func (n *node) restarted() {
	n.take()
	n.checkDrained()
}
