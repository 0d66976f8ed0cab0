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
	d, ok := bench.CoreRoundTrip(10_000, 5*time.Second)
	// A round trip is at least two cache-line transfers: never free, and
	// far below a millisecond on any machine that runs these tests.
	if !ok || d <= 0 || d > time.Millisecond {
		t.Fatalf("CoreRoundTrip(10000) = %v, %v: want a positive round trip below 1ms", d, ok)
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
