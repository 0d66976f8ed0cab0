package bench_test

import (
	"os"
	"runtime"
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

// TestReadMachine reads this machine: a busy loop of this process counts
// as busy time, and its own pid's CPU is read.
func TestReadMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc only on Linux")
	}
	pids := []int{os.Getpid()}
	m0 := bench.ReadMachine(pids)
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
	}
	m := bench.ReadMachine(pids).Sub(m0)
	if !m.Have || !m.HaveProcs || m.Cores < 1 {
		t.Fatalf("%+v: want /proc/stat, this process and at least one core read", m)
	}
	// A tick is 10ms: 100ms of spinning is at least a few of them.
	if m.Procs < 30*time.Millisecond || m.Busy() < m.Procs/2 {
		t.Errorf("after 100ms of spinning: this process %v, machine busy %v", m.Procs, m.Busy())
	}
	if got := bench.ReadMachine([]int{-1}); got.HaveProcs {
		t.Error("a pid that does not exist was read")
	}
}
