package actors

import (
	"sync/atomic"
	"time"
)

// Coalescing: after a large batch returns to a short queue, a node waits a
// little for the ops its replies set off before it sends the next batch.
//
// Under load (256 lockers on five Redis masters) the ops of one batch come
// back to the node as a wave: its replies wake their lockers, and each locker
// sends its next op (its release, or its next SET) within the client's
// processing time of the wave. A node that sends whatever is queued the
// moment its batch returns sends the wave's first few ops alone, and the rest
// of the wave waits a whole round trip behind them. Each such batch costs a
// write(2) that delivers the bytes to the server and wakes it (about 11 µs of
// client CPU here), the server's event-loop turn, read and reply write, and
// the client reader's read and wake-up: the per-batch cost that batching
// exists to spread. Counted at 256 lockers (BENCHMARKS.md, "Round 3 toward
// 1.0x the ceiling"), a sixth of the batches carried one op.
//
// So when a batch of at least coalesceMin ops returns, nothing else is in
// flight and fewer ops than it carried are queued, the node holds the queue
// until as many ops as the batch carried have arrived, or until half the
// batch's round trip has passed (at most coalesceMaxWait), whichever is
// first. Only timing changes: no op is dropped, reordered or sent twice, a
// grant's validity still counts from its batch's send (batch.sent), and an
// acquire that waited past its queue limit is still failed as stale when
// the batch is made. A lone locker never waits (its batches carry one op),
// nor do masters that answer within coalesceMinRTT (the in-memory masters:
// a batch there costs no system call, and waiting would only idle them).
const (
	coalesceMin     = 16
	coalesceMinRTT  = 50 * time.Microsecond
	coalesceMaxWait = time.Millisecond
)

// coalesce is a node's hold state. Only the node's actor touches it, apart
// from the timer's callback, which only sends a message.
type coalesce struct {
	on     bool
	target int // queue length that ends the hold
	timer  *time.Timer
	closed atomic.Bool // the node stopped: its timer must not send
}

// holdEnd ends a node's hold when its wait is up. A late one (its hold
// already ended by size) only ends a later hold early: harmless.
type holdEnd struct{}

var theHoldEnd = &holdEnd{}

// hold starts a hold, if one is due, after a batch of size ops that took rtt
// returned.
func (n *node) hold(size int, rtt time.Duration) {
	if size < coalesceMin || rtt < coalesceMinRTT || n.inflight != 0 || len(n.queue) >= size || n.co.closed.Load() {
		return
	}
	wait := min(rtt/2, coalesceMaxWait)
	n.co.on, n.co.target = true, size
	if n.co.timer == nil {
		n.co.timer = time.AfterFunc(wait, func() {
			if !n.co.closed.Load() {
				n.root.Send(n.self, theHoldEnd)
			}
		})
		return
	}
	n.co.timer.Reset(wait)
}

// holding reports whether flush must wait, ending the hold once the queue
// is long enough.
func (n *node) holding() bool {
	if !n.co.on {
		return false
	}
	if len(n.queue) < n.co.target {
		return true
	}
	n.co.on = false
	n.co.timer.Stop()
	return false
}

// stopHolds ends coalescing for good (the engine is closing: drain, then
// stop).
func (n *node) stopHolds() {
	n.co.closed.Store(true)
	n.co.on = false
	if n.co.timer != nil {
		n.co.timer.Stop()
	}
}
