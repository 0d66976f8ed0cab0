package bench_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
)

func TestCoreRoundTrip(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one core: nothing to measure between")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	// A round trip is at least two cache-line transfers, so never free. On
	// a quiet machine it is under a microsecond; under CI's load a spinner
	// may wait for its thread to be scheduled, a few ms at worst, so the
	// bounds are loose: what is tested is that turns are taken and timed.
	d, ok := bench.CoreRoundTrip(1000, 30*time.Second)
	if !ok || d <= 0 || d > 30*time.Millisecond {
		t.Fatalf("CoreRoundTrip(1000) = %v, %v: want a positive round trip below 30ms", d, ok)
	}
}

func TestCoreRoundTripGivesUp(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one core: nothing to measure between")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	start := time.Now()
	// 1<<40 round trips take hours: the budget must end it.
	if d, ok := bench.CoreRoundTrip(1<<40, 50*time.Millisecond); ok {
		t.Fatalf("CoreRoundTrip(1<<40, 50ms) = %v, true: want false once the budget is spent", d)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("CoreRoundTrip took %v to give up on a 50ms budget", el)
	}
}

func TestCoreRoundTripNeedsTwoPs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if d, ok := bench.CoreRoundTrip(1000, time.Second); ok {
		t.Fatalf("CoreRoundTrip with GOMAXPROCS 1 = %v, true: want false (the spinners would share a core)", d)
	}
}
