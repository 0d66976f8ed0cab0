package actors

import "github.com/asynkron/protoactor-go/actor"

// newCoordinatorMailbox is the coordinators' mailbox: an idle coordinator
// handles a node's reply batch on the goroutine that brings it, the node's
// I/O worker, instead of a goroutine of its own. protoactor's default
// dispatcher starts a goroutine each time an idle mailbox gets a message,
// and with few callers a coordinator goes idle between the reply batches of
// one attempt: with one locker that was a goroutine start and a wake-up for
// each master's reply. A coordinator's Receive never blocks (it waits on
// timers and messages only), so the worker can run it, as it runs its node
// actor's.
//
// Calls (Submit) still start the coordinator's goroutine: running them on
// the caller's goroutine too sent each call's ops to the nodes at once,
// where they used to pile up in the mailbox while its goroutine started,
// and at 256 lockers on the memory masters the smaller batches cost 30-50 %
// more CPU per cycle.
func newCoordinatorMailbox() actor.Mailbox {
	m := newMailbox().(*mailbox)
	m.inline = func(msg any) bool {
		_, ok := msg.(*nodeReplies)
		return ok
	}
	return m
}
