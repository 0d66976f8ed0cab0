package rueidistransport

import (
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// BenchmarkRedis runs the engine's standard workloads (package bench) on the
// engine over this transport. It has the name, sub-benchmarks and metrics of
// the engine's BenchmarkRedis in package bench (the radix transport), so
// benchstat shows the two side by side; point both at the same masters with
// REDLOCK_BENCH_NODES (else this one starts five of its own):
//
//	cd examples/rueidis && GOWORK=off go test -run '^$' -bench Redis -benchmem
func BenchmarkRedis(b *testing.B) {
	nodes := benchtest.RedisNodes(b)
	ts := make([]transport.Transport, len(nodes))
	for i, addr := range nodes {
		tr, err := New(Config{Addr: addr, OpTimeout: api.DefaultOptions().MasterTimeout})
		if err != nil {
			b.Fatal(err)
		}
		ts[i] = tr
	}
	// Fresh masters have nothing to forget: no restart quarantine, as in
	// the engine's benchmark.
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchtest.Run(b, "rueidis", bench.Engine(e))
}
