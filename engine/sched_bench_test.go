package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// BenchmarkAutoExtensionDue is the client's cost of an auto-extension the
// whole way a held lock takes it (five memory masters): the lock falls
// due, the engine's timer finds it, the slot bound lets it out, the
// extension runs, the lock is scheduled again. Rounds of 256 locks fall due
// together, as a job scheduler's rounds do; b.N counts extensions.
// BenchmarkAutoExtension counts the extension alone. For instructions,
// count it with callgrind (BENCHMARKS.md, "Held locks: one scheduler per
// engine"): it only uses what the timer per lock had too (extendAt, arm),
// so the same file measures the code before.
func BenchmarkAutoExtensionDue(b *testing.B) {
	const round = 256
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
	ls := make([]*lock, round)
	for i := range ls {
		h, err := e.TryLock(ctx, fmt.Sprintf("held-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		ls[i] = h.(*lock)
		_ = ls[i].Done() // the channel a watched lock has, made before counting
	}
	want := make([]int, round)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += round {
		k := min(round, b.N-n)
		mark := time.Now()
		for i, l := range ls[:k] {
			l.sig.Lock()
			want[i] = l.extended + 1
			l.extendAt = mark
			l.arm()
			l.sig.Unlock()
		}
		for i, l := range ls[:k] {
			for !extendedSince(l, want[i], mark) {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	b.StopTimer()
	for _, l := range ls {
		if err := l.Err(); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// extendedSince reports whether l made its want-th extension, was granted
// after mark and let go of the handle, so that it can be made due again.
func extendedSince(l *lock, want int, mark time.Time) bool {
	l.sig.Lock()
	ok := l.extended >= want && l.extendAt.After(mark)
	l.sig.Unlock()
	if !ok || !l.mu.TryLock() {
		return false
	}
	l.mu.Unlock()
	return true
}
