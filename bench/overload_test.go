package bench_test

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redistest"
)

// errCounter is a bench.Client that counts the cycles that failed with
// ErrQuorumUnreachable and remembers the first.
type errCounter struct {
	bench.Client
	unreachable atomic.Int64
	first       atomic.Pointer[error]
}

func (c *errCounter) Cycle(ctx context.Context, key string, wait bool) error {
	err := c.Client.Cycle(ctx, key, wait)
	if errors.Is(err, api.ErrQuorumUnreachable) && c.unreachable.Add(1) == 1 {
		c.first.Store(&err)
	}
	return err
}

// Admission control on real masters: 4096 lockers on five healthy
// redis-server processes, with a busy loop on every core besides, overload
// the engine's node queues far past the master timeout. Overload must show
// as latency: no cycle may fail with ErrQuorumUnreachable. (On the code
// before admission control, queued acquires older than the master timeout
// failed as if their masters were down.) It runs a few seconds; -short
// skips it, and so does the race detector, which slows the engine so much
// that batches already sent to the masters outlive the master timeout
// (ARCHITECTURE.md, "Admission control": what remains).
func TestOverloadOnRealMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of overload; -short skips it")
	}
	if raceEnabled {
		t.Skip("the race detector slows the engine past the master timeout; run it without -race")
	}
	servers := redistest.Start(t, 5)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	e, err := engine.New(addrs, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	client := &errCounter{Client: bench.Engine(e)}
	prefix := bench.RunPrefix("overload")
	if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	// The hogs are processes, as other programs on a busy machine are:
	// the kernel shares the cores between them and the engine's threads.
	var hogs []*exec.Cmd
	defer func() {
		for _, h := range hogs {
			_ = h.Process.Kill()
			_ = h.Wait()
		}
	}()
	for range runtime.NumCPU() {
		h := exec.Command("sh", "-c", "while :; do :; done")
		if err := h.Start(); err != nil {
			t.Fatalf("starting a CPU hog: %v", err)
		}
		hogs = append(hogs, h)
	}
	late := traceLate(t, api.DefaultOptions().MasterTimeout)
	rec := bench.NewRecorder()
	const lockers = 4096
	bench.Run(context.Background(), client, bench.Uncontended(lockers, prefix+"u:"), 6*lockers, rec)
	s := rec.Summarize(time.Second)
	t.Logf("%d cycles, %d failed, p50 %v, p99 %v, max %v", s.Cycles, s.Errors, s.P50, s.P99, s.Max)
	t.Log(late.summary())
	if n := client.unreachable.Load(); n > 0 {
		t.Fatalf("%d of %d cycles on healthy masters failed with ErrQuorumUnreachable (overload must show as latency); the first: %v", n, s.Cycles, *client.first.Load())
	}
	if s.Errors > 0 {
		t.Fatalf("%d of %d cycles failed; the first: %v", s.Errors, s.Cycles, s.FirstErr)
	}
}
