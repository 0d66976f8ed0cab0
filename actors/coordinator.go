package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/cenkalti/backoff/v4"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// coordinator runs calls for the keys of one shard: it fans each attempt out
// to every node actor at once, turns their replies into the quorum decision,
// releases what a failed attempt may have taken, and steps the retry backoff
// with actor timers. It never blocks: all waiting is on timers and messages.
type coordinator struct {
	// base is the coordinator's start, read from time.Now: t1, the start
	// of each phase of a call, is read as base plus the monotonic time
	// since (now), one clock read where time.Now makes two. t1 only
	// bounds waits and orders events, on the monotonic clock; a lock's
	// Start, which carries the wall clock to Until, comes from a batch's
	// send time (node.flush), not from t1.
	base          time.Time
	shard         int32
	nodes         []*actor.PID
	intakes       []*intake    // the nodes' (toNode)
	coords        []*actor.PID // every shard, this one included, by shard number
	names         []string
	quorum        int
	masterTimeout time.Duration

	self    *actor.PID
	sched   *scheduler.TimerScheduler
	seq     uint64
	active  activeCalls           // calls not finished yet (active.go)
	queues  map[string]*waitQueue // keys with a local contender
	closing bool
	m       *Metrics

	// pending holds acquire calls that ended without the lock while some
	// master may still hold their value: they are released in the
	// background (see leave).
	pending map[*Call]struct{}

	// semQueues are the local lines of semaphores, by name: apart from
	// queues, so that a semaphore and a lock may share a name.
	semQueues map[string]*waitQueue

	// retired: pooled calls let go at the end of this Receive (callpool.go).
	retired []*Call
	// freeReqs: requests to reuse; doneReqs: freed in this Receive, to go
	// there at its end (reqpool.go).
	freeReqs, doneReqs []*opRequest

	// restart: what a panic lost, answered for at the restart (coordrestart.go).
	restart coordRestart

	// mb is the coordinator's mailbox, for lone; nil in tests that build
	// a coordinator by hand.
	mb *mailbox
}

// lone reports whether the call being handled is the coordinator's only
// one and nothing waits in its mailbox: no other op is coming that its ops
// could share a batch with (opRequest.lone). It is a guess when the ops
// are sent: a call that arrives just after goes through the I/O
// goroutines, batched with whatever comes with it.
func (c *coordinator) lone() bool {
	return len(c.active) == 1 && c.mb != nil && c.mb.userN.Load() == 0
}

// cleanupMaxWait caps the delay between background cleanups of one call
// (or the master timeout, if larger): a master that comes back is cleaned
// within about this long.
const cleanupMaxWait = time.Second

// errOwnLeftover fails an acquire refused by a master where an earlier
// attempt of the same call may have left its key: the refusal may be the
// call's own value, so it must not count as "taken".
var errOwnLeftover = errors.New("refused, possibly by this call's own earlier attempt whose release did not get through")

// errOverloaded is the cause of an attempt retried because its ops waited
// past queueLimit in the node queues, or its masters were slow (slow.go): it is what a call cancelled after such
// an attempt reports as its last attempt's outcome, and it is neither
// "taken" nor "unreachable".
var errOverloaded = errors.New("overloaded: the attempt waited too long in the node queues, or its masters answered late, and was retried")

// waitQueue is the local line for one key (README, "Lock lifetime"): one contender runs
// attempts, the others wait their turn, first come first served.
type waitQueue struct {
	contender *Call
	waiters   []*Call
}

func (c *coordinator) Receive(ctx actor.Context) {
	if testCoordHook != nil {
		testCoordHook(c, ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *nodeReplies:
		for i := range m.items {
			c.onReply(ctx, m.node, m.sent, &m.items[i])
			c.answered(m.items[i].req)
		}
		putReplies(m)
	case *Call:
		c.start(ctx, m)
	case *retryTick:
		if m.call.current(m.gen) && m.call.phase == phaseWaiting && m.call.seq == m.seq {
			c.attempt(ctx, m.call)
		}
	case *cancelCall:
		if m.call.current(m.gen) {
			c.cancel(ctx, m.call, m.err)
		}
	case *cleanupTick:
		if m.call.current(m.gen) {
			c.cleanLater(ctx, m.call)
		}
	case *wakeShard:
		for _, k := range m.Keys {
			if c.shardOf(k) == int(c.shard) {
				c.wake(ctx, k)
			}
		}
	case *actor.Started:
		if c.sched != nil {
			break // a restart after a panic: the state is kept (coordrestart.go)
		}
		c.self = ctx.Self()
		c.sched = scheduler.NewTimerScheduler(ctx)
		c.queues = make(map[string]*waitQueue)
		c.pending = make(map[*Call]struct{})
	case *actor.Restarting:
		c.recoverLost(ctx)
	case *closeCalls:
		c.closing = true
		c.abandonActive(ctx)
		c.cleanLast(ctx)
		close(m.done)
	case *actor.Stopping:
		c.closing = true
		c.abandonActive(ctx)
		c.cleanLast(ctx)
	}
	if len(c.retired) != 0 {
		c.retireAll()
	}
	if len(c.doneReqs) != 0 {
		c.freeDone()
	}
}

func (c *coordinator) start(ctx actor.Context, call *Call) {
	c.active.add(call)
	switch call.Kind {
	case Acquire, AcquireAny:
		if call.Queue {
			qs := c.queuesOf(call)
			if q := qs[call.Key]; q != nil {
				call.phase = phaseQueued
				q.waiters = append(q.waiters, call)
				c.m.waiting(1)
				return
			}
			qs[call.Key] = &waitQueue{contender: call}
		}
		c.attempt(ctx, call)
	case Release:
		c.begin(call, phaseReleasing)
		call.t1 = c.now()
		c.send(ctx, call, call.Mode.release(), true)
		if call.Sem != "" {
			c.wakeSem(ctx, call.Sem)
		}
		if call.Keys == nil {
			c.wake(ctx, call.Key)
			return
		}
		// Every key of a multi-key lock may have a local waiter, in this
		// shard or another: each other shard concerned gets one wake-up.
		// It leaves after the release went to the node actors, so there
		// too the waiter's SET follows the release.
		var told [4]uint64 // shards already woken, a bit each (at most 256)
		for _, k := range call.Keys {
			s := c.shardOf(k)
			switch {
			case s == int(c.shard):
				c.wake(ctx, k)
			case told[s/64]&(1<<(s%64)) == 0:
				told[s/64] |= 1 << (s % 64)
				ctx.Send(c.coords[s], (*wakeShard)(call))
			}
		}
	case Extend:
		c.begin(call, phaseExtending)
		call.t1, call.sent = c.now(), time.Time{}
		c.send(ctx, call, call.Mode.extend(), true)
	}
}

// now is the time for a phase's t1 (see base).
func (c *coordinator) now() time.Time { return monoNow(c.base) }

func (c *coordinator) shardOf(key string) int {
	return int(keyHash(key) % uint64(len(c.coords)))
}

// wake sends key's local contender, if it sleeps in backoff, to try again
// now: a local Unlock has just sent its release to the node actors, which
// send it before the contender's SET, so the SET finds the key free.
func (c *coordinator) wake(ctx actor.Context, key string) {
	q := c.queues[key]
	if q == nil {
		return
	}
	switch q.contender.phase {
	case phaseWaiting:
		q.contender.stop()
		c.attempt(ctx, q.contender)
	case phaseAcquiring:
		q.contender.wake = true // its SET went out before this release
	}
}

// begin starts a new round of ops for call: a new seq makes every reply to
// an earlier round stale.
func (c *coordinator) begin(call *Call, p phase) {
	if call.stale == 0 {
		call.slowSince = time.Time{} // the last phase met no slow master
	}
	c.seq++
	call.seq = c.seq
	call.phase = p
	call.granted, call.refused, call.failed, call.replied = 0, 0, 0, 0
	call.answered, call.grants, call.stale = 0, 0, 0
	clear(call.errs)
}

func (c *coordinator) attempt(ctx actor.Context, call *Call) {
	if call.Kind == AcquireAny {
		c.attemptAny(ctx, call)
		return
	}
	call.timer = nil
	call.attempts++
	call.token = 0
	c.begin(call, phaseAcquiring)
	call.t1, call.sent = c.now(), time.Time{}
	if l := call.left; l != nil && l.mask&^l.cleaning != 0 {
		// An earlier attempt's key may still be here: release it first.
		// The node applies ops on one key in send order, so the SET below
		// finds it gone if the release gets through.
		c.release(ctx, call, l.mask&^l.cleaning)
	}
	switch {
	case call.Fenced:
		c.send(ctx, call, transport.AcquireFenced, true)
	case call.Mode != Mutex:
		c.send(ctx, call, call.Mode.acquire(), true)
	default:
		c.send(ctx, call, transport.Acquire, true)
	}
}

// send fans one op out to every master at once; one message, shared by all.
func (c *coordinator) send(ctx actor.Context, call *Call, kind transport.OpKind, reply bool) {
	var r *opRequest
	if reply {
		r = c.newRequest()
	} else {
		r = new(opRequest)
	}
	*r = opRequest{
		call:  call,
		gen:   call.life,
		hash:  call.hash,
		seq:   call.seq,
		op:    transport.Op{Kind: kind, Key: call.Key, Keys: call.Keys, Value: call.Value, TTL: call.TTL},
		shard: c.shard,
		reply: reply,
		lone:  c.lone(),
	}
	if reply {
		r.refs = int32(len(c.nodes)) // one answer from each (reqpool.go)
	}
	r.slowable = reply && (call.Kind == Acquire || call.Kind == Release)
	if kind == transport.RaiseFence {
		r.op.Token = call.token
	}
	if acquires(kind) {
		r.deadline = call.t1.Add(c.queueLimit(call))
	} else if call.Kind == Extend {
		r.deadline = call.Until
	}
	for i := range c.nodes {
		c.toNode(ctx, i, r)
	}
}

func (c *coordinator) onReply(ctx actor.Context, node int, sent time.Time, rep *reply) {
	call := rep.req.call
	if !call.current(rep.req.gen) {
		return // a reply to a lifetime of the Call that has ended (callpool.go)
	}
	if rep.req.cleanup {
		c.cleaned(ctx, node, rep)
		return
	}
	if rep.req.seq != call.seq || call.phase == phaseDone || call.phase == phaseWaiting || call.phase == phaseQueued || call.phase == phaseCleaning {
		return // a late reply to an attempt already decided
	}
	if c.resendUnsent(ctx, call, node, rep) {
		return
	}
	c.stillSlow(call, rep, sent)
	stillStale(call, rep, sent) // not-sent and queue-stale retries: a TTL at a stretch too
	call.replied++
	call.answered |= 1 << node
	switch {
	case rep.res.Err != nil:
		call.failed++
		if rep.res.Err == errStale || isSlow(rep.res.Err) {
			call.stale++ // overload, not failure (slow.go)
		}
		if call.errs == nil {
			call.errs = make([]error, len(c.nodes))
		}
		call.errs[node] = rep.res.Err
	case rep.res.OK:
		call.granted++
		call.grants |= 1 << node
		call.token = max(call.token, rep.res.Token)
		if (call.phase == phaseAcquiring || call.phase == phaseExtending) && (call.sent.IsZero() || sent.Before(call.sent)) {
			call.sent = sent
		}
	case rep.req.resent && resentCounts(call):
		// A release sent again after a slow master's timeout: its refusal
		// may be the first release's work (resendSlow).
		call.granted++
		call.grants |= 1 << node
	case call.phase == phaseAcquiring && call.left != nil && call.left.mask&(1<<node) != 0:
		// The release sent before this SET did not get through (its
		// reply, sent first, would have cleared the bit): the key that
		// refused may be this call's own.
		call.failed++
		if call.errs == nil {
			call.errs = make([]error, len(c.nodes))
		}
		call.errs[node] = errOwnLeftover
	default:
		call.refused++
	}
	n := len(c.nodes)
	switch call.phase {
	case phaseAcquiring, phaseFencing:
		if call.granted >= c.quorum {
			// The keys live until at least from + TTL - drift; v is what
			// is left of that now, so the lock's deadline (Start +
			// Validity) charges the round trip once.
			from := call.from()
			now := monoNow(from)
			v := call.TTL - now.Sub(from) - call.Drift
			switch {
			case v <= 0 && c.tooLate(call, now) && stillLate(call, now):
				// The masters answered: overload, retried uncounted.
				call.uncounted++
				c.failAttempt(ctx, call, errOverloaded, lateDetail("a majority granted", call, now, ""))
			case v <= 0:
				c.failAttempt(ctx, call, api.ErrQuorumUnreachable, lateDetail("a majority granted", call, now, ""))
			case call.phase == phaseAcquiring && call.Fenced:
				// The token is the largest a majority granted; it is only
				// safe once a majority confirms it (README, "Guarantees, and their limits"). A master
				// confirms only a token above its count, or equal to a
				// count this value owns, so two confirming majorities meet
				// on a master that refuses the smaller token of the later
				// grant: a refused majority below fails the attempt, and
				// the retry's increments give a larger token.
				if call.Span != nil {
					roundEvent(call, nil, "", n) // the acquire round won
				}
				c.begin(call, phaseFencing)
				c.send(ctx, call, transport.RaiseFence, true)
			default:
				call.Start, call.Validity, call.Token = now, v, call.token
				c.finish(ctx, call, nil)
			}
		} else if call.refused+call.failed > n-c.quorum {
			// Too many failures is "masters down"; otherwise masters
			// answered no: "taken". A write-back a master refuses is a
			// "no" too: it had seen a newer grant's token for the key.
			sentinel, detail := api.ErrNotAcquired, ""
			if call.failed > n-c.quorum {
				sentinel = api.ErrQuorumUnreachable
			}
			if call.stale > 0 && (call.phase == phaseAcquiring || call.phase == phaseFencing) && call.failed-call.stale <= n-c.quorum {
				// Overload, not failure: without the ops that waited
				// past queueLimit in the nodes' queues, or met slow
				// masters (slow.go; the SET's or the write-back's), the masters'
				// answers did not rule a grant out. The attempt does
				// not count: it is retried, and the wait shows as
				// latency, never as unreachable masters. (attempts
				// still counts it: it numbers the cleanup generations.)
				call.uncounted++
				sentinel, detail = errOverloaded, ""
			}
			if call.phase == phaseFencing {
				detail = "the fencing token was not confirmed by a majority"
				if sentinel == api.ErrNotAcquired {
					detail += ": the masters that refused it had seen a newer grant's token"
				}
			}
			c.failAttempt(ctx, call, sentinel, detail)
		}
	case phaseExtending:
		if call.granted >= c.quorum {
			from := call.from()
			now := monoNow(from)
			if v := call.TTL - now.Sub(from) - call.Drift; v > 0 {
				call.Start, call.Validity = now, v
				c.finish(ctx, call, nil)
			} else {
				c.finish(ctx, call, c.errorf(call, api.ErrNotHeld, lateDetail("a majority extended", call, now, tooLateAdvice)))
			}
		} else if call.refused+call.failed > n-c.quorum {
			// "Not held" only when the refusals alone rule a majority
			// out; with fewer, the masters that failed may hold the key,
			// and the lock, valid until Until whatever happens, is
			// worth another try (retryExtension, or the caller's).
			if call.refused > n-c.quorum {
				c.finish(ctx, call, c.errorf(call, api.ErrNotHeld, "a majority no longer holds it"))
			} else {
				c.finish(ctx, call, c.errorf(call, api.ErrQuorumUnreachable, "extension not confirmed"))
			}
		}
	case phaseReleasing:
		// Wait for every master: "no key left after Unlock" is only true once
		// each has answered (each answers within the master timeout).
		if call.replied < n || c.resendSlow(ctx, call) {
			return
		}
		switch {
		case call.granted >= c.quorum:
			c.finish(ctx, call, nil)
		case call.granted+call.failed >= c.quorum:
			c.finish(ctx, call, c.errorf(call, api.ErrQuorumUnreachable, "release not confirmed by a majority"))
		default:
			c.finish(ctx, call, c.errorf(call, api.ErrNotHeld, "it had already expired or been released"))
		}
	}
}

// failAttempt releases on every master what the attempt may have taken (a
// master that timed out may still have applied the SET), then retries after a
// backoff or, when the budget is spent, reports once the releases returned.
func (c *coordinator) failAttempt(ctx actor.Context, call *Call, sentinel error, detail string) {
	attemptFailed(call, sentinel, detail, len(c.nodes))
	call.lastErr = sentinel
	call.lastAns = c.answers(call)
	err := &api.Error{Op: call.Op, Key: call.Key, Err: sentinel, Attempts: call.attempts, Masters: call.lastAns, Detail: detail}
	c.leave(ctx, call)
	if call.Retry.MaxAttempts > 0 && call.attempts-call.uncounted >= call.Retry.MaxAttempts {
		call.phase = phaseCleaning
		call.lastErr = err
		if call.parent != nil {
			c.settle(ctx, call.parent)
		}
		return
	}
	if call.wake {
		// The lock was released locally while this attempt was out: the
		// key is free now, no need to wait.
		call.wake = false
		call.phase = phaseWaiting
		c.attempt(ctx, call)
		return
	}
	c.backOff(call)
}

// backOff puts call to wait for its next attempt: the next randomized
// exponential delay of its retry settings, armed as an actor timer.
func (c *coordinator) backOff(call *Call) {
	call.phase = phaseWaiting
	if call.bo == nil {
		call.bo = &backoff.ExponentialBackOff{
			InitialInterval:     call.Retry.InitialInterval,
			RandomizationFactor: call.Retry.RandomizationFactor,
			Multiplier:          call.Retry.Multiplier,
			MaxInterval:         call.Retry.MaxInterval,
			Stop:                backoff.Stop,
			Clock:               backoff.SystemClock,
		}
		call.bo.Reset()
	}
	d := call.bo.NextBackOff()
	// Never retry sooner than the attempt took, so that clients that
	// collided fall out of step instead of colliding again.
	if took := time.Since(call.t1); d <= took {
		d += took
	}
	backedOff(call, d)
	call.timer = c.sched.SendOnce(d, c.self, &retryTick{call: call, gen: call.life, seq: call.seq})
}

// cancel ends a call whose caller's context ended.
func (c *coordinator) cancel(ctx actor.Context, call *Call, cause error) {
	switch call.phase {
	case phaseDone:
		return
	case phaseQueued:
		// A waiter that gives up leaves the line at once.
		if q := c.queuesOf(call)[call.Key]; q != nil {
			for i, w := range q.waiters {
				if w == call {
					q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
					break
				}
			}
		}
	}
	c.abandon(ctx, call, cause)
}

// abandon finishes call with cause, cleaning up an attempt in flight.
func (c *coordinator) abandon(ctx actor.Context, call *Call, cause error) {
	if call.Kind == AcquireAny {
		c.abandonAny(ctx, call, cause)
		return
	}
	last := call.lastErr
	if e, ok := last.(*api.Error); ok {
		last = e.Err
	}
	ans := call.lastAns
	switch call.phase {
	case phaseAcquiring, phaseReleasing, phaseExtending, phaseFencing:
		// An attempt cut before any master answered it says nothing
		// (every master "pending"); the one before it is what last
		// describes, so its answers stay.
		if call.answered != 0 || ans == nil {
			ans = c.answers(call)
		}
	}
	if call.phase == phaseAcquiring || call.phase == phaseFencing {
		c.leave(ctx, call)
	}
	c.finish(ctx, call, &api.Error{Op: call.Op, Key: call.Key, Err: cause, Last: last, Attempts: call.attempts, Masters: ans})
}

func (c *coordinator) finish(ctx actor.Context, call *Call, err error) {
	c.unlockLeft(call) // an Unlock's slow releases: cleaned in the background too (unlockleft.go)
	call.stop()
	c.m.finished(call, err, len(c.nodes))
	call.phase = phaseDone
	call.Err = err
	c.active.remove(call)
	call.signal()
	if call.Mode == Writer && err != nil && call.attempts > 0 && !c.closing {
		c.giveUpLeft(ctx, call) // answered, and sent again where not (giveupleft.go)
	}
	if l := call.left; l != nil && l.mask != 0 && leftBehind(call, err) && !c.closing {
		// Keys of a call that won belong to its lock, and Unlock
		// releases them; a call that lost releases them from here on,
		// and so does an Unlock where its release timed out.
		c.pending[call] = struct{}{}
		l.wait = c.masterTimeout
		call.timer = c.sched.SendOnce(l.wait, c.self, &cleanupTick{call: call, gen: call.life})
	}
	c.releaseAtClose(ctx, call, err) // Close ends it: no background cleanup will follow
	c.giveUpAtClose(ctx, call, err)  // and a writer's markers go after it (giveupclose.go)
	if call.Queue {
		c.handOn(ctx, call)
	}
	if call.parent != nil {
		c.childDone(ctx, call)
	}
	c.retire(call)
}

// leave ends an attempt that did not win: its SET may have landed on any
// master (one that timed out, and even one that refused, whose key may be
// this call's own from an earlier attempt), so every master is marked and
// sent a release. Marks clear as the releases get definite answers. The
// next attempt re-sends the release, ahead of its SET, to masters still
// marked and counts their refusals as failures (errOwnLeftover), so a call
// never reports "taken" because of its own value. A call that ends without
// the lock keeps re-sending, on a timer backing off from the master timeout
// to cleanupMaxWait, until every mark is clear or the keys must have
// expired (cleanLater). Only failed attempts pay for any of this.
func (c *coordinator) leave(ctx actor.Context, call *Call) {
	// A new generation: replies to earlier releases no longer clear a
	// mark, since this attempt's SET may have followed them.
	if call.left == nil {
		call.left = new(leftovers)
	}
	l := call.left
	l.mask, l.gen, l.cleaning = 1<<len(c.nodes)-1, call.attempts, 0
	c.release(ctx, call, l.mask)
}

// release sends a cleanup release of call's current generation to the
// masters in mask.
func (c *coordinator) release(ctx actor.Context, call *Call, mask uint64) {
	r := &opRequest{
		call:    call,
		gen:     call.life,
		hash:    call.hash,
		seq:     uint64(call.left.gen),
		op:      transport.Op{Kind: cleanupKind(call), Key: call.Key, Keys: call.Keys, Value: call.Value},
		shard:   c.shard,
		reply:   true,
		cleanup: true,
	}
	if call.Kind == Release {
		// An Unlock's own op (a writer's drops its markers too), and a
		// timeout may be slow: cleaned gives up on a master only once it
		// is down (unlockleft.go). TTL: the silence limit (hear).
		r.op.Kind, r.op.TTL, r.slowable = call.Mode.release(), silenceLimit(call), true
	}
	call.left.cleaning |= mask
	for i := range c.nodes {
		if mask&(1<<i) != 0 {
			c.toNode(ctx, i, r)
		}
	}
}

// cleaned counts the reply to a cleanup release, whatever the call's phase.
func (c *coordinator) cleaned(ctx actor.Context, node int, rep *reply) {
	call, l := rep.req.call, rep.req.call.left
	if int(rep.req.seq) != l.gen {
		return // an earlier generation's: a later SET may have followed it
	}
	bit := uint64(1) << node
	l.cleaning &^= bit
	if rep.res.Err == nil || unlockGivesUp(call, rep.res.Err) {
		// Deleted, or not ours there: either way nothing of ours is left.
		// (Or an Unlock's release met a master now down: left to its TTL.)
		l.mask &^= bit
	}
	switch call.phase {
	case phaseCleaning:
		// The last attempt failed; report once its releases answered,
		// as before. What they did not clean is cleaned in the background.
		if l.cleaning == 0 {
			c.finish(ctx, call, call.lastErr)
		}
	case phaseDone:
		if _, ok := c.pending[call]; ok && l.mask == 0 {
			call.stop()
			c.unpend(call)
		}
	}
}

// cleanLater re-sends a finished call's releases that have not got
// through, and re-arms its timer, until none is left or its keys must have
// expired: the last SET went out by t1 + queueLimit and was applied
// within another master timeout, and lives TTL there, give or take the
// drift allowance.
func (c *coordinator) cleanLater(ctx actor.Context, call *Call) {
	if _, ok := c.pending[call]; !ok {
		return // cleaned, or the engine is closing
	}
	call.timer = nil
	l := call.left
	if l.mask == 0 || time.Since(call.t1) > c.queueLimit(call)+c.masterTimeout+call.TTL+call.Drift {
		c.unpend(call)
		return
	}
	if m := l.mask &^ l.cleaning; m != 0 {
		c.release(ctx, call, m)
	}
	l.wait = min(2*l.wait, max(cleanupMaxWait, c.masterTimeout))
	call.timer = c.sched.SendOnce(l.wait, c.self, &cleanupTick{call: call, gen: call.life})
}

// cleanLast makes a final attempt at every background cleanup as the engine
// closes; what it does not clean expires by its TTL.
func (c *coordinator) cleanLast(ctx actor.Context) {
	for call := range c.pending {
		call.stop()
		if m := call.left.mask &^ call.left.cleaning; m != 0 {
			c.release(ctx, call, m)
		}
		c.unpend(call)
	}
}

// handOn gives the key's turn to the next local waiter once its contender
// is done, whether it won (the waiter then finds the lock taken and backs
// off until a local Unlock wakes it) or gave up.
func (c *coordinator) handOn(ctx actor.Context, call *Call) {
	qs := c.queuesOf(call)
	q := qs[call.Key]
	if q == nil || q.contender != call {
		return // a waiter that left the line before its turn
	}
	if len(q.waiters) == 0 || c.closing {
		delete(qs, call.Key)
		return
	}
	next := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	c.m.waiting(-1)
	q.contender = next
	c.attempt(ctx, next)
}

func (c *coordinator) errorf(call *Call, sentinel error, detail string) error {
	return &api.Error{Op: call.Op, Key: call.Key, Err: sentinel, Masters: c.answers(call), Detail: detail}
}

// answers describes what each master said in the current round.
func (c *coordinator) answers(call *Call) []api.MasterAnswer {
	out := make([]api.MasterAnswer, len(c.nodes))
	for i := range out {
		out[i].Master = c.names[i]
		switch {
		case call.grants&(1<<i) != 0:
			out[i].Answer = api.Granted
		case call.answered&(1<<i) == 0:
			out[i].Answer = api.NoAnswer
		case call.errs != nil && call.errs[i] != nil:
			out[i].Answer, out[i].Err = api.Failed, answerErr(call.errs[i])
		default:
			out[i].Answer = api.Refused
		}
	}
	return out
}

// answerErr is a failed master's error as its api.MasterAnswer has it: an
// error reply (transport.ErrReply) is marked api.ErrErrorReply too, which
// makes the error's message say that the masters refused the command
// rather than that they did not answer; its text is unchanged.
func answerErr(err error) error {
	if errors.Is(err, transport.ErrReply) {
		return errorReply{err}
	}
	return err
}

type errorReply struct{ err error }

func (e errorReply) Error() string   { return e.err.Error() }
func (e errorReply) Unwrap() []error { return []error{e.err, api.ErrErrorReply} }

// queueLimit is how long an attempt's SET may wait in a node's queue before
// it is dropped unsent (errStale). A grant's validity counts from when its
// batch was sent (Call.from), so queueing costs latency, not validity, and
// the limit only needs to keep the background cleanup's horizon finite
// (cleanLater): the TTL, or the master timeout if that is longer.
func (c *coordinator) queueLimit(call *Call) time.Duration {
	return max(c.masterTimeout, call.TTL)
}
