package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// BenchmarkDoEngineKeys is one master's share of the engine's benchmark at
// 256 lockers (BenchmarkMemory/uncontended/c=256): 256 keys of the
// benchmark's shape (about 45 bytes), batches of 8 ops (the engine's batches
// there average 7.3), each key's Acquire and, 64 keys behind, a Release.
// One iteration is 32 batches of Acquires and 32 of Releases: 512 ops.
func BenchmarkDoEngineKeys(b *testing.B) {
	ctx := context.Background()
	c := memory.New().Transport()
	const keys, batch, behind = 256, 8, 64
	acq := make([]transport.Op, keys)
	rel := make([]transport.Op, keys)
	for i := range keys {
		k := fmt.Sprintf("redlock-bench:memory:18eaef772c452166:u256:%d", i)
		acq[i] = transport.Op{Kind: transport.Acquire, Key: k, Value: "0123456789abcdefghijkl", TTL: 10 * time.Second}
		rel[i] = transport.Op{Kind: transport.Release, Key: k, Value: "0123456789abcdefghijkl"}
	}
	res := make([]transport.Result, batch)
	b.ReportAllocs()
	for b.Loop() {
		for off := 0; off < keys; off += batch {
			_ = c.Do(ctx, acq[off:off+batch], res)
			r := (off + keys - behind) % keys
			_ = c.Do(ctx, rel[r:r+batch], res)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*keys), "ns/lockop")
}
