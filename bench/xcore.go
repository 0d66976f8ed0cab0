package bench

import (
	"runtime"
	"sync/atomic"
	"time"
)

// CoreRoundTrip measures how long one cache line takes to go from one core
// to another and back: two goroutines, each locked to an OS thread, spin on
// one atomic counter and take turns incrementing it, rounds times, and the
// result is the mean time per round trip. It reports false when it cannot
// measure: fewer than two Ps (the spinners would take turns on one core,
// measuring the scheduler), or budget ran out first (a core was taken away
// for that long).
//
// Why the benchmarks read it: on the 2-vCPU VMs of issue 13 the hypervisor
// places the two vCPUs near each other (about 55 ns here) or far apart
// (about 330 ns), and moves them now and then. A lock cycle hands work
// between goroutines on both cores a dozen times (mailboxes, the intake,
// the caller's wake-up), each a few cache-line transfers, so the engine's
// CPU per cycle follows the placement (4.2 against 10 µs on the memory
// masters) while single-core work, and so the CPU clock, does not move
// (BENCHMARKS.md, "Where the two vCPUs sit"). A run's figures are only
// comparable with runs on the same placement.
func CoreRoundTrip(rounds int, budget time.Duration) (time.Duration, bool) {
	if rounds <= 0 || runtime.GOMAXPROCS(0) < 2 {
		return 0, false
	}
	var turn atomic.Int64 // even: the first goroutine's turn, odd: the second's
	var gaveUp atomic.Bool
	deadline := time.Now().Add(budget)
	last := int64(2 * rounds)
	spin := func(parity int64) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		over := func() bool {
			if gaveUp.Load() || time.Now().After(deadline) {
				gaveUp.Store(true)
				return true
			}
			return false
		}
		for i := parity; i < last; i += 2 {
			// Check the budget every 1024 turns and every 64k spins of a
			// wait: a clock read per turn would be a good part of what is
			// measured.
			if i&2046 == 0 && over() {
				return
			}
			for n := 1; turn.Load() != i; n++ {
				if n&0xffff == 0 && over() {
					return
				}
			}
			turn.Store(i + 1)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		spin(1)
	}()
	start := time.Now()
	spin(0)
	<-done
	elapsed := time.Since(start)
	if gaveUp.Load() {
		return 0, false
	}
	return elapsed / time.Duration(rounds), true
}
