package bench_test

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
)

// TestAccountAddsUp: the terms of an Account add up to the cores' time, and
// others is what the busy time leaves after the client and the servers.
func TestAccountAddsUp(t *testing.T) {
	ms := time.Millisecond
	m := bench.Machine{User: 900 * ms, System: 500 * ms, SoftIRQ: 100 * ms, Idle: 400 * ms, IOWait: 50 * ms, Steal: 50 * ms, Procs: 600 * ms, Cores: 2, Have: true, HaveProcs: true}
	a := bench.AccountFor(m, 700*ms, time.Second, 1000)
	want := bench.Account{Client: 700, Servers: 600, Others: 200, Idle: 450, Steal: 50, SoftIRQ: 100, Measured: 2000, Total: 2000}
	if a != want {
		t.Fatalf("AccountFor = %+v, want %+v", a, want)
	}
	if sum := a.Client + a.Servers + a.Others + a.Idle + a.Steal; sum != a.Measured {
		t.Errorf("terms add up to %v, measured %v", sum, a.Measured)
	}
}
