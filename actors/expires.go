package actors

// expires reports whether r has a time past which the node drops it unsent
// (errStale): an acquire's attempt deadline (coordinator.queueLimit), or
// the end of an extended lock's validity (Call.Until). An extension still
// queued at its lock's Until can no longer keep the lock, which the engine
// reports lost then; on a client that has fallen behind its extensions
// (BENCHMARKS.md, "Held locks under load"), every op queued ahead of a
// live lock's extension is one more wait for it, so the dead ones must not
// take batch slots. A dropped extension fails as unreachable, and its call
// has mostly been given up already.
func expires(r *opRequest) bool {
	return acquires(r.op.Kind) || !r.deadline.IsZero()
}
