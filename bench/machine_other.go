//go:build !linux

package bench

// ReadMachine has no counters off Linux (the benchmarks then omit them).
func ReadMachine(pids []int) Machine { return Machine{} }
