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

	self   *actor.PID
	sched  *scheduler.TimerScheduler
	seq    uint64
	active map[*Call]struct{}
}

func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *nodeReplies:
		for i := range m.items {
			c.onReply(ctx, m.node, &m.items[i])
		}
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
	case *closeCalls:
		for call := range c.active {
			c.abandon(ctx, call, api.ErrClosed)
		}
		close(m.done)
	case *actor.Stopping:
		for call := range c.active {
			c.abandon(ctx, call, api.ErrClosed)
		}
	}
}

func (c *coordinator) start(ctx actor.Context, call *Call) {
	c.active[call] = struct{}{}
	switch call.Kind {
	case Acquire:
		c.attempt(ctx, call)
	case Release:
		c.begin(call, phaseReleasing)
		c.send(ctx, call, transport.Release, true)
	case Extend:
		c.begin(call, phaseExtending)
		c.send(ctx, call, transport.Extend, true)
	}
}

// begin starts a new round of ops for call: a new seq makes every reply to
// an earlier round stale.
func (c *coordinator) begin(call *Call, p phase) {
	c.seq++
	call.seq = c.seq
	call.phase = p
	call.t1 = time.Now()
	call.granted, call.refused, call.failed, call.replied = 0, 0, 0, 0
	call.answered, call.grants = 0, 0
	clear(call.errs)
}

func (c *coordinator) attempt(ctx actor.Context, call *Call) {
	call.stop = nil
	call.attempts++
	c.begin(call, phaseAcquiring)
	c.send(ctx, call, transport.Acquire, true)
}

// send fans one op out to every master at once; one message, shared by all.
func (c *coordinator) send(ctx actor.Context, call *Call, kind transport.OpKind, reply bool) {
	r := &opRequest{
		call:  call,
		seq:   call.seq,
		op:    transport.Op{Kind: kind, Key: call.Key, Value: call.Value, TTL: call.TTL},
		shard: c.shard,
		reply: reply,
	}
	if kind == transport.Acquire {
		r.deadline = call.t1.Add(c.masterTimeout)
	}
	for _, pid := range c.nodes {
		ctx.Send(pid, r)
	}
}

func (c *coordinator) onReply(ctx actor.Context, node int, rep *reply) {
	call := rep.req.call
	if rep.req.seq != call.seq || call.phase == phaseDone || call.phase == phaseWaiting {
		return // a late reply to an attempt already decided
	}
	if call.phase == phaseCleaning {
		if rep.req.op.Kind == transport.Release {
			if call.replied++; call.replied == len(c.nodes) {
				c.finish(call, call.lastErr)
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
	default:
		call.refused++
	}
	n := len(c.nodes)
	switch call.phase {
	case phaseAcquiring:
		if call.granted >= c.quorum {
			if v := call.TTL - time.Since(call.t1) - call.Drift; v > 0 {
				call.Start, call.Validity = call.t1, v
				c.finish(call, nil)
			} else {
				c.failAttempt(ctx, call, api.ErrQuorumUnreachable, "a majority granted, but too late: the validity was used up")
			}
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
				c.finish(call, nil)
			} else {
				c.finish(call, c.errorf(call, api.ErrNotHeld, "a majority extended, but too late: the validity was used up"))
			}
		} else if call.refused+call.failed > n-c.quorum {
			if call.failed > n-c.quorum {
				c.finish(call, c.errorf(call, api.ErrQuorumUnreachable, "extension not confirmed"))
			} else {
				c.finish(call, c.errorf(call, api.ErrNotHeld, "a majority no longer holds it"))
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
			c.finish(call, nil)
		case call.granted+call.failed >= c.quorum:
			c.finish(call, c.errorf(call, api.ErrQuorumUnreachable, "release not confirmed by a majority"))
		default:
			c.finish(call, c.errorf(call, api.ErrNotHeld, "it had already expired or been released"))
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
	d := call.bo.NextBackOff()
	// Never retry sooner than the attempt took, so that clients that
	// collided fall out of step instead of colliding again.
	if took := time.Since(call.t1); d <= took {
		d += took
	}
	call.stop = c.sched.SendOnce(d, c.self, &retryTick{call: call, seq: call.seq})
}

// cancel ends a call whose caller's context ended.
func (c *coordinator) cancel(ctx actor.Context, call *Call, cause error) {
	if call.phase == phaseDone {
		return
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
	if call.phase == phaseAcquiring || call.phase == phaseReleasing || call.phase == phaseExtending {
		ans = c.answers(call)
	}
	if call.phase == phaseAcquiring {
		c.send(ctx, call, transport.Release, false)
	}
	c.finish(call, &api.Error{Op: call.Op, Key: call.Key, Err: cause, Last: last, Attempts: call.attempts, Masters: ans})
}

func (c *coordinator) finish(call *Call, err error) {
	if call.stop != nil {
		call.stop()
		call.stop = nil
	}
	call.phase = phaseDone
	call.Err = err
	delete(c.active, call)
	close(call.done)
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
