package actors

import (
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
	shard         int32
	nodes         []*actor.PID
	names         []string
	quorum        int
	masterTimeout time.Duration

	self    *actor.PID
	sched   *scheduler.TimerScheduler
	seq     uint64
	active  map[*Call]struct{}
	queues  map[string]*waitQueue // keys with a local contender
	closing bool
}

// waitQueue is the local line for one key (design §6): one contender runs
// attempts, the others wait their turn, first come first served.
type waitQueue struct {
	contender *Call
	waiters   []*Call
}

func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *nodeReplies:
		for i := range m.items {
			c.onReply(ctx, m.node, &m.items[i])
		}
		putReplies(m)
	case *Call:
		c.start(ctx, m)
	case *retryTick:
		if m.call.phase == phaseWaiting && m.call.seq == m.seq {
			c.attempt(ctx, m.call)
		}
	case *cancelCall:
		c.cancel(ctx, m.call, m.err)
	case *actor.Started:
		c.self = ctx.Self()
		c.sched = scheduler.NewTimerScheduler(ctx)
		c.active = make(map[*Call]struct{})
		c.queues = make(map[string]*waitQueue)
	case *closeCalls:
		c.closing = true
		for call := range c.active {
			c.abandon(ctx, call, api.ErrClosed)
		}
		close(m.done)
	case *actor.Stopping:
		c.closing = true
		for call := range c.active {
			c.abandon(ctx, call, api.ErrClosed)
		}
	}
}

func (c *coordinator) start(ctx actor.Context, call *Call) {
	c.active[call] = struct{}{}
	switch call.Kind {
	case Acquire:
		if call.Queue {
			if q := c.queues[call.Key]; q != nil {
				call.phase = phaseQueued
				q.waiters = append(q.waiters, call)
				return
			}
			c.queues[call.Key] = &waitQueue{contender: call}
		}
		c.attempt(ctx, call)
	case Release:
		c.begin(call, phaseReleasing)
		call.t1 = time.Now()
		c.send(ctx, call, transport.Release, true)
		// A local waiter sleeping in backoff goes now: the node actors
		// send this release before its SET, so it finds the key free.
		if q := c.queues[call.Key]; q != nil {
			switch q.contender.phase {
			case phaseWaiting:
				q.contender.stop()
				c.attempt(ctx, q.contender)
			case phaseAcquiring:
				q.contender.wake = true // its SET went out before this release
			}
		}
	case Extend:
		c.begin(call, phaseExtending)
		call.t1 = time.Now()
		c.send(ctx, call, transport.Extend, true)
	}
}

// begin starts a new round of ops for call: a new seq makes every reply to
// an earlier round stale.
func (c *coordinator) begin(call *Call, p phase) {
	c.seq++
	call.seq = c.seq
	call.phase = p
	call.granted, call.refused, call.failed, call.replied = 0, 0, 0, 0
	call.answered, call.grants = 0, 0
	clear(call.errs)
}

func (c *coordinator) attempt(ctx actor.Context, call *Call) {
	call.timer = nil
	call.attempts++
	call.token = 0
	c.begin(call, phaseAcquiring)
	call.t1 = time.Now()
	if call.Fenced {
		c.send(ctx, call, transport.AcquireFenced, true)
	} else {
		c.send(ctx, call, transport.Acquire, true)
	}
}

// send fans one op out to every master at once; one message, shared by all.
func (c *coordinator) send(ctx actor.Context, call *Call, kind transport.OpKind, reply bool) {
	r := &opRequest{
		call:  call,
		hash:  call.hash,
		seq:   call.seq,
		op:    transport.Op{Kind: kind, Key: call.Key, Keys: call.Keys, Value: call.Value, TTL: call.TTL},
		shard: c.shard,
		reply: reply,
	}
	if kind == transport.RaiseFence {
		r.op.Token = call.token
	}
	if kind == transport.Acquire || kind == transport.AcquireFenced {
		r.deadline = call.t1.Add(c.masterTimeout)
	}
	for _, pid := range c.nodes {
		ctx.Send(pid, r)
	}
}

func (c *coordinator) onReply(ctx actor.Context, node int, rep *reply) {
	call := rep.req.call
	if rep.req.seq != call.seq || call.phase == phaseDone || call.phase == phaseWaiting || call.phase == phaseQueued {
		return // a late reply to an attempt already decided
	}
	if call.phase == phaseCleaning {
		if rep.req.op.Kind == transport.Release {
			if call.replied++; call.replied == len(c.nodes) {
				c.finish(ctx, call, call.lastErr)
			}
		}
		return
	}
	call.replied++
	call.answered |= 1 << node
	switch {
	case rep.res.Err != nil:
		call.failed++
		if call.errs == nil {
			call.errs = make([]error, len(c.nodes))
		}
		call.errs[node] = rep.res.Err
	case rep.res.OK:
		call.granted++
		call.grants |= 1 << node
		call.token = max(call.token, rep.res.Token)
	default:
		call.refused++
	}
	n := len(c.nodes)
	switch call.phase {
	case phaseAcquiring, phaseFencing:
		if call.granted >= c.quorum {
			v := call.TTL - time.Since(call.t1) - call.Drift
			switch {
			case v <= 0:
				c.failAttempt(ctx, call, api.ErrQuorumUnreachable, "a majority granted, but too late: the validity was used up")
			case call.phase == phaseAcquiring && call.Fenced:
				// The token is the largest a majority granted; it is only
				// safe once a majority confirms it (design §4). A master
				// confirms only a token above its count, or equal to a
				// count this value owns, so two confirming majorities meet
				// on a master that refuses the smaller token of the later
				// grant: a refused majority below fails the attempt, and
				// the retry's increments give a larger token.
				c.begin(call, phaseFencing)
				c.send(ctx, call, transport.RaiseFence, true)
			default:
				call.Start, call.Validity, call.Token = call.t1, v, call.token
				c.finish(ctx, call, nil)
			}
		} else if call.phase == phaseFencing && call.refused+call.failed > n-c.quorum {
			c.failAttempt(ctx, call, api.ErrQuorumUnreachable, "the fencing token was not confirmed by a majority")
		} else if call.refused+call.failed > n-c.quorum {
			if call.failed > n-c.quorum {
				c.failAttempt(ctx, call, api.ErrQuorumUnreachable, "")
			} else {
				c.failAttempt(ctx, call, api.ErrNotAcquired, "")
			}
		}
	case phaseExtending:
		if call.granted >= c.quorum {
			if v := call.TTL - time.Since(call.t1) - call.Drift; v > 0 {
				call.Start, call.Validity = call.t1, v
				c.finish(ctx, call, nil)
			} else {
				c.finish(ctx, call, c.errorf(call, api.ErrNotHeld, "a majority extended, but too late: the validity was used up"))
			}
		} else if call.refused+call.failed > n-c.quorum {
			if call.failed > n-c.quorum {
				c.finish(ctx, call, c.errorf(call, api.ErrQuorumUnreachable, "extension not confirmed"))
			} else {
				c.finish(ctx, call, c.errorf(call, api.ErrNotHeld, "a majority no longer holds it"))
			}
		}
	case phaseReleasing:
		// Wait for every master: "no key left after Unlock" is only true once
		// each has answered (each answers within the master timeout).
		if call.replied < n {
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
	call.lastErr = sentinel
	call.lastAns = c.answers(call)
	err := &api.Error{Op: call.Op, Key: call.Key, Err: sentinel, Attempts: call.attempts, Masters: call.lastAns, Detail: detail}
	if call.Retry.MaxAttempts > 0 && call.attempts >= call.Retry.MaxAttempts {
		call.phase = phaseCleaning
		call.replied = 0
		call.lastErr = err
		c.send(ctx, call, transport.Release, true)
		return
	}
	c.send(ctx, call, transport.Release, false)
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
	if call.wake {
		// The lock was released locally while this attempt was out: the
		// key is free now, no need to wait.
		call.wake = false
		c.attempt(ctx, call)
		return
	}
	d := call.bo.NextBackOff()
	// Never retry sooner than the attempt took, so that clients that
	// collided fall out of step instead of colliding again.
	if took := time.Since(call.t1); d <= took {
		d += took
	}
	call.timer = c.sched.SendOnce(d, c.self, &retryTick{call: call, seq: call.seq})
}

// cancel ends a call whose caller's context ended.
func (c *coordinator) cancel(ctx actor.Context, call *Call, cause error) {
	switch call.phase {
	case phaseDone:
		return
	case phaseQueued:
		// A waiter that gives up leaves the line at once.
		if q := c.queues[call.Key]; q != nil {
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
	last := call.lastErr
	if e, ok := last.(*api.Error); ok {
		last = e.Err
	}
	ans := call.lastAns
	switch call.phase {
	case phaseAcquiring, phaseReleasing, phaseExtending, phaseFencing:
		ans = c.answers(call)
	}
	if call.phase == phaseAcquiring || call.phase == phaseFencing {
		c.send(ctx, call, transport.Release, false)
	}
	c.finish(ctx, call, &api.Error{Op: call.Op, Key: call.Key, Err: cause, Last: last, Attempts: call.attempts, Masters: ans})
}

func (c *coordinator) finish(ctx actor.Context, call *Call, err error) {
	call.stop()
	call.phase = phaseDone
	call.Err = err
	delete(c.active, call)
	close(call.done)
	if call.Queue {
		c.handOn(ctx, call)
	}
}

// handOn gives the key's turn to the next local waiter once its contender
// is done, whether it won (the waiter then finds the lock taken and backs
// off until a local Unlock wakes it) or gave up.
func (c *coordinator) handOn(ctx actor.Context, call *Call) {
	q := c.queues[call.Key]
	if q == nil || q.contender != call {
		return // a waiter that left the line before its turn
	}
	if len(q.waiters) == 0 || c.closing {
		delete(c.queues, call.Key)
		return
	}
	next := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
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
			out[i].Answer, out[i].Err = api.Failed, call.errs[i]
		default:
			out[i].Answer = api.Refused
		}
	}
	return out
}
