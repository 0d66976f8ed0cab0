package actors

import "github.com/asynkron/protoactor-go/actor"

// loneCallMailbox is a coordinator's mailbox (newCoordinatorMailbox) that
// also runs a call on the caller's goroutine whenever the mailbox is idle.
// protoactor's dispatcher would start a goroutine for it, and the caller
// would only wait for that goroutine to fan the call out (a goroutine start
// and the wake-up of a thread to run it, per call). A coordinator's Receive
// never blocks, so the caller can run it; it holds no lock of the engine's
// while it submits. A call that finds the mailbox running waits in it, as
// before, and the running goroutine takes it.
//
// This used to be for lone calls only (no call in flight): perfmem measured
// every call inline at 30-50 % more CPU per cycle at 256 lockers, because
// each call's ops then met idle node actors and went out in batches of one.
// The nodes' intake (intake.go, mem17) took that cost away: ops now pile up
// in the intake while a batch is out, wherever the call ran. Interleaved
// against lone calls only (BENCHMARKS.md, "In-memory masters, round 5"),
// every call inline took 5.2 % off the CPU per cycle on the memory masters
// at 256 lockers and 5.7 % on Redis, and left one locker level.
func loneCallMailbox() actor.Mailbox {
	m := newCoordinatorMailbox().(*mailbox)
	m.inline = inlineCalls
	return m
}
