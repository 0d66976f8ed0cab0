package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// benchOps is a batch of n Acquires followed by the n Releases of the same
// keys, so every iteration leaves the master as it found it.
func benchOps(prefix string, n int) []transport.Op {
	ops := make([]transport.Op, 0, 2*n)
	for i := range n {
		ops = append(ops, acq(fmt.Sprintf("%s:%d", prefix, i), "value-0123456789abcdef0123456789abcdef", 10*time.Second))
	}
	for i := range n {
		ops = append(ops, rel(ops[i].Key, ops[i].Value))
	}
	return ops
}

func checkBench(b *testing.B, res []transport.Result) {
	for i := range res {
		if res[i].Err != nil || !res[i].OK {
			b.Fatalf("op %d: %+v", i, res[i])
		}
	}
}

// BenchmarkDo: one goroutine, batches of 64 Acquire + 64 Release.
func BenchmarkDo(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	tr := dial(b, Config{Addr: s.Addr})
	ops := benchOps("bench", 64)
	res := make([]transport.Result, len(ops))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := tr.Do(ctx, ops, res); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	checkBench(b, res)
	b.ReportMetric(float64(len(ops))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkDoParallel: GOMAXPROCS goroutines share the one connection, as
// the engine's node actors would with several batches in flight.
func BenchmarkDoParallel(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	tr := dial(b, Config{Addr: s.Addr})
	var g atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ops := benchOps(fmt.Sprintf("bench%d", g.Add(1)), 64)
		res := make([]transport.Result, len(ops))
		for pb.Next() {
			if err := tr.Do(ctx, ops, res); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(128*float64(b.N)/time.Since(start).Seconds(), "ops/s")
}
