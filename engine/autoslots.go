package engine

import "github.com/quorumlock/redlock/api"

// autoSlotsPerBatch scales the auto-extensions allowed out at once: enough
// to keep every batch slot of every node full (maxBatch ops in each of
// maxInFlight batches) several times over, so that on a client with CPU to
// spare the bound never holds an extension back.
const autoSlotsPerBatch = 4

// autoSlots is the engine's bound on auto-extensions out at once.
//
// Without it a round of n locks falling due together starts n extensions
// at once, each doing its share of the extension's CPU (the call, the
// coordinator's and the nodes' messages) ahead in the run queue of the
// reader, node and coordinator work that would complete the extensions
// already sent. On a client with the CPU for the round that costs nothing;
// on one starved of CPU (BENCHMARKS.md, "Held locks under load"), the
// replies are read after the master timeout and the extensions fail
// together, so every lock of the round is lost where the CPU there was
// would have kept some. With the bound, the rest wait in the scheduler's
// line (sched.go: an entry each, no goroutine), in the order they fell
// due, and one whose lock ends meanwhile is skipped without being sent.
func autoSlots(o api.Options) int {
	return autoSlotsPerBatch * max(1, o.MaxBatch) * max(1, o.MaxInFlight)
}

// extendDue makes the auto-extension l waited in line for, on a worker of
// the scheduler, unless the lock ended meanwhile (Done closed: expired,
// released, lost or the engine closed), or the user's Extend or Unlock has
// the handle, or an Extend meanwhile made it no longer due. l.done is made.
func (l *lock) extendDue() {
	select {
	case <-l.done:
		return
	default:
	}
	if !l.mu.TryLock() {
		// The user's Extend or Unlock has the handle. Unlock ends the lock
		// (whatever its context); Extend re-arms once it has let go, so a
		// failed one is retried by the scheduler.
		return
	}
	if !l.stillDue() {
		l.letGo()
		l.rearm()
		return
	}
	l.autoExtend()
}
