package rueidistransport

import (
	"testing"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
)

// BenchmarkRedis runs the engine's standard workloads (package bench) on the
// engine over this transport. It has the name, sub-benchmarks and metrics of
// the engine's BenchmarkRedis in package bench (the radix transport), so
// benchstat shows the two side by side; point both at the same masters with
// REDLOCK_BENCH_NODES (else this one starts five of its own):
//
//	cd examples/rueidis && GOWORK=off go test -run '^$' -bench Redis -benchmem
func BenchmarkRedis(b *testing.B) {
	benchtest.Run(b, "rueidis", bench.Engine(newEngine(b, benchtest.RedisNodes(b))))
}
