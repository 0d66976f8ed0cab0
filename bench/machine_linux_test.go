package bench_test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
)

// TestReadMachine reads this machine: a busy loop of this process counts
// as busy time, and its own pid's CPU is read.
func TestReadMachine(t *testing.T) {
	pids := []int{os.Getpid()}
	m0 := bench.ReadMachine(pids)
	// Spin for 100ms of this process's CPU, not of the wall clock: on a
	// loaded machine 100ms of wall time may give it a few ticks only.
	for start := cpuTime(t); cpuTime(t)-start < 100*time.Millisecond; {
	}
	m := bench.ReadMachine(pids).Sub(m0)
	if !m.Have || !m.HaveProcs || m.Cores < 1 {
		t.Fatalf("%+v: want /proc/stat, this process and at least one core read", m)
	}
	// A tick is 10ms: 100ms of CPU is at least a few of them.
	if m.Procs < 30*time.Millisecond || m.Busy() < m.Procs/2 {
		t.Errorf("after 100ms of spinning: this process %v, machine busy %v", m.Procs, m.Busy())
	}
	if got := bench.ReadMachine([]int{-1}); got.HaveProcs {
		t.Error("a pid that does not exist was read")
	}
}

// cpuTime is the CPU this process has used (getrusage, which the kernel
// keeps apart from the /proc files ReadMachine reads).
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
