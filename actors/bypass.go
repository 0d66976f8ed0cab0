package actors

import "github.com/asynkron/protoactor-go/actor"

// bypass runs an actor's user messages straight from its mailbox, without
// protoactor's per-message envelope work: actorContext.InvokeUserMessage
// (a stopped check, the receive-timeout and metrics checks), processMessage
// (the middleware and decorator checks, storing the message in the context)
// and defaultReceive (a type switch that asserts every message against the
// AutoRespond interface). At 256 lockers on Redis a lock cycle carries about
// 14 user messages (ten ops into the node actors, replies to the
// coordinators, returned batches), and callgrind put that envelope work at
// about 1,600 instructions per cycle, 4 % of the client (BENCHMARKS.md,
// "ceil17"). That count predates the nodes' intake (intake.go, mem17),
// which turned the ten ops into about 1.3 wake-ups (wakeNode) a cycle: the
// bypass now saves less on the way to the nodes, as much on the way back.
//
// It keeps what the engine's actors rely on. Messages are handled in
// mailbox order, one at a time (the mailbox's run loop calls handle where it
// would call InvokeUserMessage). Receive gets a Context whose Message is the
// message and whose every other method is the actor's own context (Send,
// Self, ActorSystem: what the engine's actors use; none of them reads the
// envelope, which these messages never have). Until the actor has started,
// and for any message but the hot path's five (see handle), handle
// declines and protoactor's path runs; once the actor has stopped, user
// messages are dropped, as protoactor drops them. The engine's actors set
// no receive timeout, middleware or decorator, and the actor system no
// metrics, which are what the skipped checks look for.
type bypass struct {
	a       actor.Actor
	ctx     bypassCtx // reused: the mailbox runs one message at a time
	stopped bool
}

// bypassCtx is the actor's context with Message overridden, and Send to
// the engine's node actors (peers) posted straight into their mailboxes.
type bypassCtx struct {
	actor.Context
	msg   any
	peers []peer
}

// peer is a node actor that a coordinator sends its ops to.
type peer struct {
	pid *actor.PID
	mb  actor.Mailbox
}

func (c *bypassCtx) Message() any { return c.msg }

// Send posts msg into pid's mailbox when pid is a peer, as protoactor's
// Send would (the context's sender middleware, of which the engine sets
// none, then the PID's process, then its mailbox) less the PID's
// resolution: a coordinator's wake-ups of the nodes (intake.go).
// It differs only once the node has stopped, after Close: protoactor would
// hand msg to its dead letters, this to the mailbox, whose bypass drops it
// (handle) without telling the dead letters.
func (c *bypassCtx) Send(pid *actor.PID, msg any) {
	for i := range c.peers {
		if c.peers[i].pid == pid {
			c.peers[i].mb.PostUserMessage(msg)
			return
		}
	}
	c.Context.Send(pid, msg)
}

// Receive is the actor's Receive for protoactor's path: it learns the
// context at Started and that the actor stopped at Stopped.
func (b *bypass) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		b.ctx.Context = ctx
	case *actor.Stopped:
		b.stopped = true
	}
	b.a.Receive(ctx)
}

// handle is the mailbox's hook (mailbox.direct): it reports whether it
// handled msg, which the mailbox then does not hand to protoactor.
func (b *bypass) handle(msg any) bool {
	// Only the hot path's messages: a type switch on concrete types is a
	// compare each, where protoactor's check for its own messages asserts
	// every message against an interface. Anything else (PoisonPill,
	// drains, timers, INFO results) takes protoactor's path.
	switch msg.(type) {
	case *wakeNode, *opRequest, *batch, *nodeReplies, *Call:
	default:
		return false
	}
	if b.stopped {
		return true
	}
	if b.ctx.Context == nil {
		return false
	}
	b.ctx.msg = msg
	b.a.Receive(&b.ctx)
	b.ctx.msg = nil
	return true
}

// withBypass makes m run its actor's hot messages through b (see bypass).
func withBypass(b *bypass, m actor.Mailbox) actor.Mailbox {
	m.(*mailbox).direct = b
	return m
}
