package actors

import "github.com/asynkron/protoactor-go/actor"

// newCoordinatorMailbox is the coordinators' mailbox: an idle coordinator
// handles a node's reply batch of a single reply on the goroutine that
// brings it, the node's I/O worker, instead of a goroutine of its own.
// protoactor's default dispatcher starts a goroutine each time an idle
// mailbox gets a message, and with one locker a coordinator goes idle
// between the reply batches of an attempt: a goroutine start and a wake-up
// for each master's reply. A coordinator's Receive never blocks (it waits on
// timers and messages only), so the worker can run it, as it runs its node
// actor.
//
// Only then, though. Calls (Submit) run on the caller's goroutine sent each
// call's ops to the nodes at once, where they used to pile up in the mailbox
// while its goroutine started: at 256 lockers on the memory masters, 30-50 %
// more CPU per cycle. Larger reply batches, inline on the worker, cost about
// 30 % there too (the worker's next batch waits while it counts the replies,
// and the replies no longer collect while the goroutine starts). A batch of
// one reply is the lone-request case, where there is nothing to collect.
func newCoordinatorMailbox() actor.Mailbox {
	m := newMailbox().(*mailbox)
	m.inline = inlineReplies
	return m
}
