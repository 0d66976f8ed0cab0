package engine

import "github.com/quorumlock/redlock/api"

// autoSlotsPerBatch scales the auto-extensions allowed out at once: enough
// to keep every batch slot of every node full (maxBatch ops in each of
// maxInFlight batches) several times over, so that on a client with CPU to
// spare the bound never holds an extension back.
const autoSlotsPerBatch = 4

// newAutoSlots is the engine's bound on auto-extensions out at once.
//
// Without it a round of n locks falling due together starts n extensions
// at once: n timer goroutines made runnable at one instant, each running
// its share of the extension's CPU (the call, the coordinator's and the
// nodes' messages), ahead in the run queue of the reader, node and
// coordinator work that would complete the extensions already sent. On a
// client with the CPU for the round that costs nothing; on one starved of
// CPU (BENCHMARKS.md, "Held locks under load"), the replies are read after
// the master timeout and the extensions fail together, so every lock of
// the round is lost where the CPU there was would have kept some. With the
// bound, the rest wait parked (not runnable) on a channel, in the order
// they fell due (a channel's waiters are served first come, first
// served), and one whose lock ends meanwhile gives up without being sent.
func newAutoSlots(o api.Options) chan struct{} {
	return make(chan struct{}, autoSlotsPerBatch*max(1, o.MaxBatch)*max(1, o.MaxInFlight))
}

// takeSlot waits for an auto-extension slot, and reports false if the lock
// ended first (Done closed: expired, released, lost or the engine closed),
// when there is nothing left to extend. l.done is made.
func (l *lock) takeSlot() bool {
	select {
	case l.e.autoSlots <- struct{}{}:
		return true
	default:
	}
	select {
	case l.e.autoSlots <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

func (l *lock) freeSlot() { <-l.e.autoSlots }
