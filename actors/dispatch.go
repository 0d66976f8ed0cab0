package actors

import "github.com/asynkron/protoactor-go/actor"

// coordinatorDispatch runs a coordinator's Receive on the goroutine of the
// message's sender when its mailbox is idle, as the nodes' already does.
// protoactor's default dispatcher starts a goroutine each time an idle
// mailbox gets a message, and a coordinator goes idle between the replies
// of one attempt: with one locker that was a goroutine start and a wake-up
// for the call and for each master's reply. A coordinator's Receive never
// blocks (it waits on timers and messages only), so the sender, a caller in
// Submit, a node's I/O worker or a timer, can run it; a busy mailbox is
// drained by whoever found it idle, up to the throughput, then that
// goroutine yields.
var coordinatorDispatch = actor.WithDispatcher(actor.NewSynchronizedDispatcher(300))
