package torture

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// monoNow reads CLOCK_MONOTONIC: one clock for every process on the
// machine, so the client-pause workers' times compare with the parent's.
func monoNow() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return ts.Nano(), nil
}

// workerProcAttr has the kernel kill a worker when the torture that
// started it dies without stopping it, as redisproc does for the masters.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// stopProcess and contProcess pause and resume a worker, as a GC pause or
// a VM stall would.
func stopProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }
func contProcess(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }

const clientPauseSupported = true

// calibrate takes the tightest of a few pairings: the error of a
// conversion is half the width of the bracket, well below a microsecond.
func calibrate() (monoCal, error) {
	var best monoCal
	width := int64(-1)
	for range 5 {
		a, err := monoNow()
		if err != nil {
			return monoCal{}, err
		}
		t := time.Now()
		b, err := monoNow()
		if err != nil {
			return monoCal{}, err
		}
		if width < 0 || b-a < width {
			width, best = b-a, monoCal{base: a + (b-a)/2, at: t}
		}
	}
	return best, nil
}
