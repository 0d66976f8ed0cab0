package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
)

// A writer's markers after a failed write lock (SAFETY.md, giveup17).
//
// Each attempt of a write lock refused by live readers leaves a
// writer-waiting marker on the masters, with the lock's TTL; a writer that
// ends without the lock drops them with its give-up (a ReleaseShared of its
// value). The give-up used to want no reply, on the grounds that a marker it
// misses expires within the TTL. But on a master that was slow when it was
// due (timed out unapplied, or not sent at all: transport.ErrNotSent) the
// marker then stayed for that TTL after a failed attempt, against the house
// rule, and held back every new reader of the key meanwhile
// (TestWriterGiveUpLostLeavesNoMarker).
//
// So the give-up is a cleanup release like those of a failed acquire
// (coordinator.leave, cleanLater), of a new generation: sent to every
// master, answered, and sent again in the background from a master timeout
// on, backing off to cleanupMaxWait, to the masters that did not answer it,
// until each has, or the markers must have expired (cleanLater's horizon:
// the last attempt's marker was set by t1 + queueLimit + a master timeout
// and lives a TTL, as its value would). The give-up deletes the writer's
// value where an attempt was granted there, as the plain Release does, and
// its markers too, so it replaces the releases of the last attempt: their
// late answers belong to the old generation and are ignored, and a resend,
// whether from cleanLater or cleanLast, is the give-up (cleanupKind). It
// deletes only this call's value and markers, which nothing sets again once
// the call is done, so a late or repeated give-up is harmless. The order
// rule holds: it is sent when the call finishes, after every release of
// the call's attempts, and a node applies ops on one key in send order.
//
// A master that answers with an error other than success keeps its mark,
// slow or down, as a failed acquire's does: the same op also deletes the
// attempt's value there, which the failed acquire's cleanup keeps trying
// until the horizon, and dropping it earlier for a writer would leave that
// value behind where a mutex's is cleaned.

// giveUpLeft sends the give-up of call, a write lock that ends without the
// lock (finish, not while closing: giveUpAtClose covers that), as a new
// generation of its cleanup; finish then keeps the call pending while a
// master has not answered it.
func (c *coordinator) giveUpLeft(ctx actor.Context, call *Call) {
	if call.left == nil {
		call.left = new(leftovers)
	}
	l := call.left
	// attempts+1: no attempt follows, and the attempts' generations are
	// at most attempts, so their replies no longer clear a mark.
	l.mask, l.gen, l.cleaning = 1<<len(c.nodes)-1, call.attempts+1, 0
	c.release(ctx, call, l.mask)
}

// gaveUp reports whether call's cleanup releases are a writer's give-up: a
// write lock's, once it is done (it only has leftovers if it ended without
// the lock, or is an Unlock whose op is the same ReleaseShared).
func gaveUp(call *Call) bool { return call.Mode == Writer && call.phase == phaseDone }

// cleanupKind is the op of call's cleanup releases: a failed attempt's
// (Mode.cleanup), or, once a writer gave up, its give-up, which must not be
// a plain Release or its markers would stay behind.
func cleanupKind(call *Call) transport.OpKind {
	if gaveUp(call) {
		return transport.ReleaseShared
	}
	return call.Mode.cleanup()
}
