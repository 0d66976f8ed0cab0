package engine

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// BenchmarkAutoExtension is the cost of one auto-extension on the client
// (five memory masters), as the lock's timer runs it: a job scheduler
// holding n locks pays it n times a period, and what it allocates sets how
// often the collector walks all n handles (BENCHMARKS.md, held locks).
func BenchmarkAutoExtension(b *testing.B) {
	ts := make([]transport.Transport, 5)
	for i := range ts {
		ts[i] = memory.New().Transport()
	}
	e, err := NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(time.Hour),
		api.WithMaxExtensions(1<<40), api.WithAutoExtend(0.5))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	h, err := e.TryLock(ctx, "held")
	if err != nil {
		b.Fatal(err)
	}
	l := h.(*lock)
	_ = l.Done() // make the channel a watched lock has, before counting
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l.mu.Lock()
		l.autoExtend()
	}
	b.StopTimer()
	if err := l.Err(); err != nil {
		b.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
}
