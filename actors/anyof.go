package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/api"
)

// An AcquireAny call takes one slot of a semaphore: any one of Permits
// ordinary lock keys (api.SemaphoreSlot). Each attempt tries the slots in
// windows; for each slot of a window the coordinator runs a child call, an
// ordinary one-attempt Acquire of that slot, so each slot is decided by
// the mutex's own quorum rule and its cleanup (leave, pending) covers
// whatever a child that did not win left behind. The children of a window
// start together, so their SETs travel in the same batches to every
// master. The first child that wins is the permit; a child that wins after
// it is released at once (discard), with confirmed releases like any
// leftover.
//
// Each child has its own value, the call's value with the attempt and the
// slot appended: a background release of one child's leftovers can then
// never delete a key that a later child of the same call won (the mutex
// keeps one value per call because one Call tries one key, and orders its
// releases ahead of its own next SET; children are separate calls).
//
// Windows: the first is one slot at random, each next one twice as many
// slots as the last, following on from it, until every slot has been tried.
// A window is only tried once every slot before it was refused, so an
// attempt tries all slots (ErrNotAcquired means that every slot was taken)
// while it rarely holds more than one grant: the extra grants of a window
// (released at once) can only come after slots were found taken, so a
// semaphore that is mostly free costs what a mutex does, one SET per
// master, and one that is full costs log2(P)+1 round trips to refuse.
//
// Why not all P slots at once: every contender would then race on every
// slot, and a master hands every free slot to the first batch that reaches
// it, so a contender that reaches a majority first takes every free slot
// (holding them for a round trip, until it releases all but one) while the
// others get none; and when three contenders reach three masters in
// different orders, every slot splits and nobody wins, with P permits
// free. Random starts put concurrent contenders on different slots, so
// they rarely meet at all; two that meet on a slot (one wins it, or the
// vote splits) move on at once to the next, larger window rather than
// back off; only an attempt that finds every slot refused backs off, as a
// mutex's does, randomized, which is what breaks a repeated split.
const firstWindow = 1

// anyOf is the state of an AcquireAny call.
type anyOf struct {
	start       int // the slot the attempt's first window starts at
	tried       int // slots tried in this attempt
	window      int // size of the last window
	outstanding int // children of the current window still running
	taken       int // children of this attempt refused as taken
	unreachable int // children of this attempt that too few masters answered
	other       error
	masters     []api.MasterAnswer // what the masters said to the last failed child
	lateKid     string             // that child's detail, when a majority granted it too late
	kids        []*Call            // the current window's children
	winner      *Call              // the window's first child that won
	slot        *Call              // the child whose grant the call returned
	ending      bool               // the call is being abandoned
	late        bool               // a winner's validity ran out before the window decided
}

// Won is the slot key and value an AcquireAny call won (read once Done is
// closed and Err is nil): the permit's key and value.
func (c *Call) Won() (key, value string) {
	if c.any == nil || c.any.slot == nil {
		return "", ""
	}
	return c.any.slot.Key, c.any.slot.Value
}

// attemptAny starts an attempt of an AcquireAny call: its first window.
func (c *coordinator) attemptAny(ctx actor.Context, call *Call) {
	call.timer = nil
	call.attempts++
	c.begin(call, phaseAcquiring)
	call.t1 = c.now()
	if call.any == nil {
		call.any = new(anyOf)
	}
	a := call.any
	a.start, a.tried, a.window = rand.IntN(call.Permits), 0, 0
	a.taken, a.unreachable, a.other, a.masters, a.winner, a.late, a.lateKid = 0, 0, nil, nil, nil, false, ""
	c.tryWindow(ctx, call)
}

// tryWindow starts one child per slot of the attempt's next window.
func (c *coordinator) tryWindow(ctx actor.Context, call *Call) {
	a := call.any
	w := min(max(firstWindow, 2*a.window), call.Permits-a.tried)
	clear(a.kids)
	a.kids = a.kids[:0]
	for j := range w {
		slot := (a.start + a.tried + j) % call.Permits
		v := call.Value + "." + strconv.Itoa(call.attempts) + "." + strconv.Itoa(slot)
		k := NewCall(Acquire, call.Op, api.SemaphoreSlot(call.Sem, slot), v, call.TTL, call.Drift)
		k.Retry = call.Retry
		k.Retry.MaxAttempts = 1
		k.Fenced = call.Fenced
		k.parent = call
		k.hash = keyHash(k.Key)
		a.kids = append(a.kids, k)
	}
	a.tried += w
	a.window = w
	a.outstanding = w
	// All children are registered before any starts: a child decides only
	// on replies, never inside attempt, so none finishes before the loop
	// ends, but Close must see all of them.
	for _, k := range a.kids {
		c.active.add(k)
	}
	for _, k := range a.kids {
		c.attempt(ctx, k)
	}
}

// childDone counts a finished child into its parent's attempt.
func (c *coordinator) childDone(ctx actor.Context, k *Call) {
	p, a := k.parent, k.parent.any
	if k.Err == nil {
		if p.phase != phaseAcquiring || a.ending {
			// The parent has its permit already, or gave up: this slot
			// is one too many.
			c.discard(ctx, k)
			return
		}
		a.outstanding--
		if a.winner != nil {
			c.discard(ctx, k)
		} else {
			a.winner = k
		}
		c.settle(ctx, p)
		return
	}
	if p.phase != phaseAcquiring || a.ending || c.closing {
		return // the parent is ending (or will be, as the engine closes)
	}
	a.outstanding--
	if a.winner != nil {
		c.settle(ctx, p)
		return
	}
	var ae *api.Error
	if errors.As(k.Err, &ae) && !a.late {
		// A late winner's answers stay: they are what failAny reports.
		a.masters, a.lateKid = ae.Masters, ""
	}
	switch {
	case errors.Is(k.Err, api.ErrNotAcquired):
		a.taken++
	case errors.Is(k.Err, api.ErrQuorumUnreachable):
		a.unreachable++
		if ae != nil && !a.late && grantedMajority(ae.Masters, c.quorum) {
			// Granted too late, not undecided: "too few masters
			// answered" would contradict the answers shown.
			a.lateKid = ae.Detail
		}
	default:
		a.other = k.Err
	}
	if a.outstanding > 0 {
		return
	}
	if a.tried < p.Permits && a.unreachable == 0 && a.other == nil && !a.late {
		c.tryWindow(ctx, p)
		return
	}
	c.failAny(ctx, p)
}

// settle grants the parent its winner's slot once every child of the
// window has decided: the extra grants are then released already, ahead of
// anything the caller sends next (a TrySemaphore right after this one
// would otherwise find its own extra grant still holding a slot). A child
// that lost has decided when it starts cleaning up (its releases answer
// in the background of the parent, as for a TryLock that lost); one that
// won has finished.
func (c *coordinator) settle(ctx actor.Context, p *Call) {
	a := p.any
	if a.winner == nil || p.phase != phaseAcquiring {
		return
	}
	for _, k := range a.kids {
		if k.phase != phaseDone && k.phase != phaseCleaning {
			return
		}
	}
	w := a.winner
	if !time.Now().Before(w.Start.Add(w.Validity)) {
		// Its validity ran out while the others decided: a permit that
		// is already over is no permit, as for a lock granted too late.
		// Its masters' grants are what the error shows: the answers of
		// a slot that lost would not tell why.
		a.masters = c.answers(w)
		c.discard(ctx, w)
		a.winner = nil
		a.late = true
		if a.outstanding == 0 {
			c.failAny(ctx, p)
		}
		return
	}
	p.Start, p.Validity, p.Token = w.Start, w.Validity, w.Token
	a.slot = w
	c.finish(ctx, p, nil)
}

// discard releases a child's grant that its parent does not need, on every
// master, and keeps releasing in the background until each master answered
// (or the key must have expired), as for the leftovers of a failed attempt.
func (c *coordinator) discard(ctx actor.Context, k *Call) {
	c.leave(ctx, k)
	if !c.closing {
		c.pending[k] = struct{}{}
		k.left.wait = c.masterTimeout
		k.timer = c.sched.SendOnce(k.left.wait, c.self, &cleanupTick{call: k, gen: k.life})
	}
	// A local waiter of the semaphore may now find this slot free; the
	// release went to the nodes first, so its SET follows the release.
	c.wakeSem(ctx, k.parent.Sem)
}

// failAny ends an attempt in which no child won: it retries after a
// backoff, or reports once the budget is spent. Every child has finished,
// so their releases have answered (or are left to the background).
func (c *coordinator) failAny(ctx actor.Context, call *Call) {
	a := call.any
	sentinel := api.ErrNotAcquired
	detail := fmt.Sprintf("all %d permits are held", call.Permits)
	switch {
	case a.other != nil:
		sentinel, detail = api.ErrQuorumUnreachable, "a slot could not be decided: "+a.other.Error()
	case a.late:
		sentinel, detail = api.ErrQuorumUnreachable, "a slot was granted, but too late: the validity was used up while other slots were decided"
	case a.lateKid != "":
		sentinel, detail = api.ErrQuorumUnreachable, fmt.Sprintf("%d of the %d slots tried were not decided in time; the last: %s", a.unreachable, a.tried, a.lateKid)
	case a.unreachable > 0:
		sentinel = api.ErrQuorumUnreachable
		detail = fmt.Sprintf("%d of the %d slots tried could not be decided: too few masters answered", a.unreachable, a.tried)
	}
	call.lastErr = sentinel
	call.lastAns = a.masters
	err := &api.Error{Op: call.Op, Key: call.Key, Err: sentinel, Attempts: call.attempts, Masters: a.masters, Detail: detail}
	if call.Retry.MaxAttempts > 0 && call.attempts >= call.Retry.MaxAttempts {
		c.finish(ctx, call, err)
		return
	}
	if call.wake {
		// A local holder released a permit while this attempt was out.
		call.wake = false
		call.phase = phaseWaiting
		c.attemptAny(ctx, call)
		return
	}
	c.backOff(call)
}

// abandonAny ends an AcquireAny call with cause: its running children are
// abandoned (each releases what it may have taken), and a child that wins
// later is discarded.
func (c *coordinator) abandonAny(ctx actor.Context, call *Call, cause error) {
	if call.phase == phaseDone {
		return
	}
	var last error
	if call.any != nil {
		a := call.any
		a.ending = true
		if call.phase == phaseAcquiring {
			for _, k := range a.kids {
				if k.phase != phaseDone {
					c.abandon(ctx, k, cause)
				}
			}
			if a.winner != nil {
				// Won, but not yet handed over (other children were
				// still deciding): nobody will unlock it.
				c.discard(ctx, a.winner)
				a.winner = nil
			}
		}
		last = call.lastErr
	}
	c.finish(ctx, call, &api.Error{Op: call.Op, Key: call.Key, Err: cause, Last: last, Attempts: call.attempts, Masters: call.lastAns})
}

// queuesOf is the map of local lines that call waits in.
func (c *coordinator) queuesOf(call *Call) map[string]*waitQueue {
	if call.Kind != AcquireAny {
		return c.queues
	}
	if c.semQueues == nil {
		c.semQueues = make(map[string]*waitQueue)
	}
	return c.semQueues
}

// wakeSem sends the semaphore's local contender, if it sleeps in backoff,
// to try again now: a permit was just released from this engine.
func (c *coordinator) wakeSem(ctx actor.Context, name string) {
	q := c.semQueues[name]
	if q == nil {
		return
	}
	switch q.contender.phase {
	case phaseWaiting:
		q.contender.stop()
		c.attemptAny(ctx, q.contender)
	case phaseAcquiring:
		q.contender.wake = true
	}
}

// grantedMajority reports whether a majority of ms granted: an
// ErrQuorumUnreachable with such answers came too late, not undecided.
func grantedMajority(ms []api.MasterAnswer, quorum int) bool {
	n := 0
	for _, m := range ms {
		if m.Answer == api.Granted {
			n++
		}
	}
	return n >= quorum
}
