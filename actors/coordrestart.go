package actors

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/api"
)

// A panic in a coordinator's Receive is a bug of ours (or of a user's
// meter, which finish calls). protoactor's mailbox recovers it, wherever
// the mailbox ran: on the dispatcher's goroutine, a node's worker (a reply
// batch of one, mailbox.go) or a caller's goroutine (a call that found the
// mailbox idle, lonecall.go). A panic never reaches the caller's code: the
// mailbox's run recovers it, marks itself idle and runs the suspend and
// restart that protoactor posts, so the caller's Submit returns as usual
// and the coordinator stays schedulable. protoactor then restarts the
// actor, with the same *coordinator (its producer returns the one bypass),
// and the message that panicked is lost. So, as for nodes (restart.go):
//
//   - Started after a restart keeps everything: the wait queues, the
//     background cleanups (pending), the active set and the timers already
//     armed, which still reach the same PID. Remaking them, as Started did,
//     left every local waiter and every background cleanup behind: their
//     callers waited forever, and their keys stayed for their TTL.
//   - The mailbox tells the coordinator what panicked and the message it
//     lost (recovering); at Restarting it answers for that message
//     (recoverLost): every unfinished call the message was about is ended
//     with api.ErrInternal wrapping the panic value, the way a cancel ends
//     it (an acquire in flight is released on every master and its keys
//     join the background cleanup; an Unlock's masters that had not
//     answered get its release again; a queued call leaves its line, a
//     contender hands the key on). Then it looks for calls the panic left
//     stuck where no message will come for them (sweep).
//
// What it cannot see: a call whose ops went out to some masters and not
// to others because the panic cut a fan-out that the lost message started
// for another call (a waiter given its turn by handOn, a contender woken).
// SAFETY.md, "Coordinator restart after a panic (coord19)".

// restartingRoot spawns the coordinators and the node actors under a
// guardian that restarts them after every panic. protoactor's default
// supervisor, for actors spawned from the root, stops an actor that failed
// more than 10 times in 10 seconds. A stopped coordinator's calls go to
// the dead letters while Submit returns nil, so every later caller of its
// keys, and Close, would wait forever; a stopped node sends its master
// nothing again, so every call waits a master timeout for it and an Unlock
// leaves its key there (noderestart24). A bug that panics on every call or
// batch (a user's meter that panics in finish, or as a batch returns) then
// fails what it touches (ErrInternal from a coordinator, an outcome unknown
// from a node) instead, and what does not panic still runs.
func restartingRoot(system *actor.ActorSystem) *actor.RootContext {
	return system.Root.WithGuardian(actor.NewRestartingStrategy())
}

// testCoordHook, when set (tests only; nil in production), runs as a
// coordinator starts to handle any message. A test makes it panic to
// restart the coordinator on the real path (coordrestart_test.go).
var testCoordHook func(c *coordinator, msg any)

// coordRestart is what a coordinator keeps about its last panic until the
// restart answers for it.
type coordRestart struct {
	logger *slog.Logger
	lost   any // the message the panic lost
	why    any // the panic value
	failed bool
}

// recovering makes mb tell c about a panic before protoactor restarts it.
func (c *coordinator) recovering(logger *slog.Logger, mb actor.Mailbox) actor.Mailbox {
	c.restart.logger = logger
	mb.(*mailbox).recovered = c.recovered
	return mb
}

// recovered runs in the mailbox's recover, on the goroutine that ran the
// coordinator, with the panicking frames still on the stack.
func (c *coordinator) recovered(reason, msg any) {
	r := &c.restart
	r.lost, r.why, r.failed = actor.UnwrapEnvelopeMessage(msg), reason, true
	if r.logger != nil {
		r.logger.Error("redlock: a coordinator panicked (a bug; please report it with this stack); it restarts and fails the calls of the message it lost with ErrInternal",
			"coordinator", c.shard, "panic", fmt.Sprint(reason), "message", fmt.Sprintf("%T", msg), "stack", string(debug.Stack()))
	}
}

// recoverLost answers for what the last panic lost; it runs at Restarting.
func (c *coordinator) recoverLost(ctx actor.Context) {
	r := &c.restart
	if !r.failed {
		return
	}
	lost, why := r.lost, r.why
	// Out first: should the recovery panic too, it does not run twice.
	r.lost, r.why, r.failed = nil, nil, false
	perr := &api.PanicError{Actor: fmt.Sprintf("coordinator %d", c.shard), Value: why}
	switch m := lost.(type) {
	case *Call:
		if m.current(m.life) {
			c.failLost(ctx, m, perr)
		}
	case *nodeReplies:
		for i := range m.items {
			rep := &m.items[i]
			if call := rep.req.call; call.current(rep.req.gen) {
				if rep.req.cleanup {
					c.lostCleanupReply(ctx, m.node, rep)
				} else {
					c.failLost(ctx, call, perr)
				}
			}
		}
	case *retryTick:
		if m.call.current(m.gen) {
			c.failLost(ctx, m.call, perr)
		}
	case *cancelCall:
		if m.call.current(m.gen) {
			c.failLost(ctx, m.call, perr)
		}
	case *cleanupTick:
		if m.call.current(m.gen) {
			c.guard(func() { c.resumeCleanup(ctx, m.call) })
		}
	case *wakeShard:
		// A woken contender may have been cut between its timer's stop
		// and its attempt's sends.
		for _, k := range m.Keys {
			if q := c.queues[k]; q != nil && c.shardOf(k) == int(c.shard) {
				c.failLost(ctx, q.contender, perr)
			}
		}
	case *closeCalls:
		c.closing = true
		for _, call := range slices.Clone(c.active) {
			if call.slot != 0 {
				c.guard(func() { c.abandon(ctx, call, api.ErrClosed) })
				c.answer(call, &api.Error{Op: call.Op, Key: call.Key, Err: api.ErrClosed})
			}
		}
		c.guard(func() { c.cleanLast(ctx) })
		select {
		case <-m.done:
		default:
			close(m.done) // Close waits for it
		}
	}
	c.sweep(ctx, perr)
}

// failLost ends call, whose message a panic lost, with perr, as a cancel
// would: an acquire in flight is released on every master, a waiter leaves
// its line, a contender hands its key on. An AcquireAny's child takes its
// parent with it (the parent counts on its every child).
func (c *coordinator) failLost(ctx actor.Context, call *Call, perr *api.PanicError) {
	if p := call.parent; p != nil && p.phase != phaseDone {
		call = p
	}
	if call.phase == phaseDone {
		c.guard(func() { c.resumeCleanup(ctx, call) })
		return
	}
	if call.Kind == Release && call.phase == phaseNew {
		// Lost before its release went out: every master is to be
		// released (unlockLeft counts the ones that did not answer).
		c.begin(call, phaseReleasing)
		call.t1 = time.Now() // the background cleanup's horizon counts from here
	}
	c.guard(func() { c.cancel(ctx, call, perr) })
	c.answer(call, &api.Error{Op: call.Op, Key: call.Key, Err: perr, Attempts: call.attempts})
	c.guard(func() { c.resumeCleanup(ctx, call) })
}

// answer makes sure call's caller has its answer, should the coordinator's
// own finish have panicked before it signalled.
func (c *coordinator) answer(call *Call, err error) {
	if call.phase == phaseDone {
		return // finish signals right after it marks the call done
	}
	call.phase, call.Err = phaseDone, err
	c.active.remove(call)
	call.signal()
}

// resumeCleanup restarts the background cleanup of a finished call right
// away: releases whose sends or answers the panic may have lost are sent
// again to every master still marked (a release deletes only the call's
// own value, so a second one is harmless), and its timer is armed again.
func (c *coordinator) resumeCleanup(ctx actor.Context, call *Call) {
	if _, ok := c.pending[call]; !ok || call.left == nil {
		return
	}
	l := call.left
	l.cleaning = 0
	if l.mask != 0 {
		c.release(ctx, call, l.mask)
	}
	call.stop()
	l.wait = max(l.wait, c.masterTimeout)
	call.timer = c.sched.SendOnce(l.wait, c.self, &cleanupTick{call: call, gen: call.life})
}

// lostCleanupReply answers for a cleanup release's reply that a panic lost:
// its master no longer counts as having a release out (the next attempt or
// the background cleanup sends it again), and a call that waited only for
// its releases' answers to report its failure reports it now.
func (c *coordinator) lostCleanupReply(ctx actor.Context, node int, rep *reply) {
	call, l := rep.req.call, rep.req.call.left
	if l != nil && int(rep.req.seq) == l.gen {
		l.cleaning &^= 1 << node
	}
	switch call.phase {
	case phaseCleaning:
		c.guard(func() { c.finish(ctx, call, call.lastErr) })
		c.answer(call, call.lastErr)
		c.guard(func() { c.resumeCleanup(ctx, call) })
	case phaseDone:
		c.guard(func() { c.resumeCleanup(ctx, call) })
	}
}

// sweep ends the calls that a panic left where no message will come for
// them, whichever message it lost: an active call never started (phaseNew:
// a call or an AcquireAny's child cut before its first send), one backing
// off with no timer armed (cut between its timer's stop and its attempt),
// a queue whose contender never got its attempt; and it hands on a key
// whose contender finished without handing it on.
func (c *coordinator) sweep(ctx actor.Context, perr *api.PanicError) {
	for _, call := range slices.Clone(c.active) {
		if call.slot != 0 && (call.phase == phaseNew || call.phase == phaseWaiting && call.timer == nil) {
			c.failLost(ctx, call, perr)
		}
	}
	for _, qs := range []map[string]*waitQueue{c.queues, c.semQueues} {
		for _, q := range qs {
			switch k := q.contender; {
			case k.phase == phaseQueued:
				c.failLost(ctx, k, perr)
			case k.phase == phaseDone || k.slot == 0:
				c.guard(func() { c.handOn(ctx, k) })
			}
		}
	}
}

// guard runs f, part of the recovery from a panic, and recovers a panic of
// f's own: the recovery goes on with the next call rather than losing
// every answer after the one that panicked again.
func (c *coordinator) guard(f func()) {
	defer func() {
		if r := recover(); r != nil && c.restart.logger != nil {
			c.restart.logger.Error("redlock: a coordinator panicked again while recovering from a panic", "coordinator", c.shard, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}
