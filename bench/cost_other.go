//go:build !linux

package bench

// ReadCost has no counters off Linux (the benchmarks then omit them).
func ReadCost() Cost { return Cost{} }
