package bench_test

import (
	"strconv"
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/bench/floor"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/redis"
)

// floorLockers are the lockers BenchmarkFloor runs with: one, and the 256
// of the issue-13 targets.
var floorLockers = []int{1, 256}

// BenchmarkFloor runs the skeleton of the engine's message pattern
// (package floor: callers, coordinators, five node actors, no lock work)
// with the same harness and metrics as BenchmarkMemory and BenchmarkRedis,
// uncontended, so that benchstat puts it beside them:
//
//	BenchmarkFloor/none/VARIANT/uncontended/c=N    no transport: every op granted at once
//	BenchmarkFloor/memory/VARIANT/uncontended/c=N  five in-memory masters (their work counts, as in BenchmarkMemory)
//	BenchmarkFloor/redis/VARIANT/uncontended/c=N   five redis-server masters (as BenchmarkRedis)
//
// The variants are the framework's choices (floor.Variant); the cheapest
// is the floor. bench/floor.sh runs it interleaved with the engine.
func BenchmarkFloor(b *testing.B) {
	async := []floor.Variant{
		{Node: floor.Worker},                                         // the engine's shape
		{Node: floor.Worker, InlineCoordinator: true},                // coordinator on the sender's goroutine
		{Node: floor.Worker, ProtoMailbox: true},                     // protoactor's own mailbox
		{Node: floor.Worker, InlineCoordinator: true, Request: true}, // Request instead of Send
		{Node: floor.Worker, GoroutineNode: true},                    // node on a goroutine of its own
		{Node: floor.Worker, Coordinators: 1},
		{Node: floor.Worker, Coordinators: 4},
		{Node: floor.Worker, InlineCoordinator: true, Coordinators: 1},
		{Node: floor.Worker, InlineCoordinator: true, Coordinators: 4},
	}
	// Only for masters that answer without waiting.
	sync := []floor.Variant{
		{Node: floor.SelfFlush},
		{Node: floor.SelfFlush, InlineCoordinator: true},
		{Node: floor.SelfFlush, Coordinators: 1},
		{Node: floor.PerOp},
		{Node: floor.PerOp, InlineCoordinator: true},
	}
	mem := func() []transport.Transport {
		ts := make([]transport.Transport, 5)
		for i := range ts {
			ts[i] = memory.New().Transport()
		}
		return ts
	}
	for _, tr := range []struct {
		name     string
		make     func(b *testing.B) []transport.Transport
		variants []floor.Variant
	}{
		{"none", func(*testing.B) []transport.Transport { return make([]transport.Transport, 5) }, append(async, sync...)},
		{"memory", func(*testing.B) []transport.Transport { return mem() }, append(async, sync...)},
		{"redis", redisTransports, async},
	} {
		b.Run(tr.name, func(b *testing.B) {
			for _, v := range tr.variants {
				b.Run(v.Name(), func(b *testing.B) {
					ts := tr.make(b)
					s, err := floor.New(ts, v)
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					prefix := bench.RunPrefix("floor-" + tr.name + "-" + v.Name())
					for _, c := range floorLockers {
						w := bench.Uncontended(c, prefix+"u"+strconv.Itoa(c)+":")
						b.Run(w.Name(), func(b *testing.B) { benchtest.RunWorkload(b, s, w) })
					}
				})
			}
		})
	}
}

// redisTransports connects to the benchmark's Redis masters as
// engine.New does (one transport each, the master timeout as op timeout),
// closed when b ends.
func redisTransports(b *testing.B) []transport.Transport {
	nodes := benchtest.RedisNodes(b)
	ts := make([]transport.Transport, len(nodes))
	for i, addr := range nodes {
		cfg, err := redis.ParseAddr(addr)
		if err != nil {
			b.Fatal(err)
		}
		cfg.OpTimeout = api.DefaultOptions().MasterTimeout
		t, err := redis.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		ts[i] = t
	}
	return ts
}
