package engine

// SetAutoSlots sets how many auto-extensions may be out at once; call it
// before any lock is taken.
func SetAutoSlots(e *Engine, n int) {
	e.sched.lmu.Lock()
	e.sched.limit = n
	e.sched.lmu.Unlock()
}
