package bench

import "time"

// Cost is what this process has spent so far, as the kernel counts it. Two
// readings subtracted give a run's cost; divided by its cycles, the cost
// per cycle, which moves much less with other load on a shared machine than
// throughput does: a busy machine makes each cycle wait longer, but not
// make more system calls.
type Cost struct {
	// CPU is user plus system time (getrusage).
	CPU time.Duration
	// Reads and Writes are read-like and write-like system calls (read,
	// readv, pread... and write, writev, ...; /proc/self/io's syscr and
	// syscw). Socket I/O of Go programs is read(2) and write(2).
	Reads, Writes int64
	// Voluntary context switches are a thread blocking (a futex, epoll_wait
	// with nothing ready: a wake-up later); involuntary ones are the kernel
	// taking a core away (getrusage ru_nvcsw, ru_nivcsw, all threads).
	Voluntary, Involuntary int64
	// HaveCPU and HaveIO say which counters this platform has.
	HaveCPU, HaveIO bool
}

// Sub is c minus an earlier reading.
func (c Cost) Sub(earlier Cost) Cost {
	return Cost{
		CPU:         c.CPU - earlier.CPU,
		Reads:       c.Reads - earlier.Reads,
		Writes:      c.Writes - earlier.Writes,
		Voluntary:   c.Voluntary - earlier.Voluntary,
		Involuntary: c.Involuntary - earlier.Involuntary,
		HaveCPU:     c.HaveCPU && earlier.HaveCPU,
		HaveIO:      c.HaveIO && earlier.HaveIO,
	}
}

// PerCycle is c divided over n cycles, in the units the benchmarks report.
type PerCycle struct {
	CPUMicros   float64 `json:"cpu_us"`
	Reads       float64 `json:"reads"`
	Writes      float64 `json:"writes"`
	Voluntary   float64 `json:"vcsw"`
	Involuntary float64 `json:"ivcsw"`
}

// Per divides c over n cycles (n > 0).
func (c Cost) Per(n int64) PerCycle {
	f := float64(n)
	return PerCycle{
		CPUMicros:   float64(c.CPU) / float64(time.Microsecond) / f,
		Reads:       float64(c.Reads) / f,
		Writes:      float64(c.Writes) / f,
		Voluntary:   float64(c.Voluntary) / f,
		Involuntary: float64(c.Involuntary) / f,
	}
}
