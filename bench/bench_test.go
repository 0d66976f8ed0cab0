package bench_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
)

// The benchmarks only run with -bench:
//
//	go test -run '^$' -bench . -benchmem ./bench
//
// BenchmarkMemory runs on five embedded in-memory masters; BenchmarkRedis on
// five redis-server processes (REDLOCK_BENCH_NODES, else started here). The
// redsync module in bench/redsync has a BenchmarkRedis with the same
// sub-benchmarks and metrics; bench/run.sh runs both on the same masters.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func BenchmarkMemory(b *testing.B) {
	e, err := engine.NewMemory(5)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchtest.Run(b, "memory", bench.Engine(e))
}

func BenchmarkRedis(b *testing.B) {
	// Fresh masters have nothing to forget: no restart quarantine.
	e, err := engine.New(benchtest.RedisNodes(b), api.WithoutRestartQuarantine())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchtest.Run(b, "engine", bench.Engine(e))
}

// BenchmarkContention runs 1 to 4096 lockers on one key (Lock + Unlock) on
// Redis and reports, besides throughput and latency, how evenly the lockers
// got the lock (benchtest.RunContention). bench/scale.sh runs it with
// enough cycles for every locker to have several turns.
func BenchmarkContention(b *testing.B) {
	e, err := engine.New(benchtest.RedisNodes(b), api.WithoutRestartQuarantine())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchtest.RunContention(b, "engine", bench.Engine(e), benchtest.MaxContention())
}

// BenchmarkTuning runs uncontended/c=256 on Redis with engine-wide options
// and transport settings other than the defaults, to show what batching,
// sharding and write coalescing buy:
//
//	go test -run '^$' -bench Tuning -benchmem -count 5 ./bench
func BenchmarkTuning(b *testing.B) {
	nodes := benchtest.RedisNodes(b)
	for _, v := range []struct {
		name  string
		opts  []api.Option
		flush time.Duration // the Redis transport's WriteFlushInterval
	}{
		{name: "default"}, // 512 ops a batch, 1 batch in flight per master, 1 coordinator on two Ps (2 above), no write coalescing
		{name: "inflight=2", opts: []api.Option{api.WithBatching(512, 2)}},
		{name: "inflight=4", opts: []api.Option{api.WithBatching(512, 4)}},
		{name: "batch=64", opts: []api.Option{api.WithBatching(64, 2)}},
		{name: "coordinators=1", opts: []api.Option{api.WithCoordinators(1)}},
		{name: "coordinators=2", opts: []api.Option{api.WithCoordinators(2)}},
		{name: "coordinators=4", opts: []api.Option{api.WithCoordinators(4)}},
		{name: "flush=50us", flush: 50 * time.Microsecond},
		{name: "flush=200us", flush: 200 * time.Microsecond},
	} {
		b.Run(v.name, func(b *testing.B) {
			opts := append(v.opts, api.WithoutRestartQuarantine())
			ts := make([]transport.Transport, len(nodes))
			for i, addr := range nodes {
				cfg, err := redis.ParseAddr(addr)
				if err != nil {
					b.Fatal(err)
				}
				cfg.OpTimeout = api.DefaultOptions().MasterTimeout
				cfg.WriteFlushInterval = v.flush
				if ts[i], err = redis.New(cfg); err != nil {
					b.Fatal(err)
				}
			}
			e, err := engine.NewWithTransports(ts, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			client := bench.Engine(e)
			prefix := bench.RunPrefix("tuning-" + v.name)
			if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
				b.Fatal(err)
			}
			benchtest.RunWorkload(b, client, bench.Uncontended(256, prefix))
		})
	}
}

// TestRun checks the runner on the embedded masters, quickly: every cycle is
// counted once, fresh keys are never refused, and contended lockers all get
// their turn.
func TestRun(t *testing.T) {
	e, err := engine.NewMemory(5)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	client := bench.Engine(e)
	prefix := bench.RunPrefix("test")
	if err := bench.WaitReady(context.Background(), client, prefix, 5*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range []bench.Workload{bench.Uncontended(8, prefix+"u:"), bench.Contended(16, prefix+"c:")} {
		t.Run(w.Name(), func(t *testing.T) {
			rec := bench.NewRecorder()
			bench.Run(context.Background(), client, w, 500, rec)
			s := rec.Summarize(time.Second)
			if s.Cycles != 500 || s.Acquired != 500 || s.Errors != 0 {
				t.Fatalf("%+v: want 500 cycles, all acquired", s)
			}
			if h := rec.Histogram(); h.TotalCount() != 500 {
				t.Errorf("histogram holds %d latencies, want 500", h.TotalCount())
			}
			if s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 {
				t.Errorf("latencies p50 %v, p99 %v, max %v: not ordered", s.P50, s.P99, s.Max)
			}
		})
	}
}

// TestRunUntilCancelled: with n == 0 the run ends with its context, and a
// cycle cut short by it is not counted as a failure.
func TestRunUntilCancelled(t *testing.T) {
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rec := bench.NewRecorder()
	// 4 lockers on one key: most of them wait in Lock when ctx ends.
	bench.Run(ctx, bench.Engine(e), bench.Workload{Concurrency: 4, Keys: 1, Prefix: bench.RunPrefix("cancel")}, 0, rec)
	s := rec.Summarize(200 * time.Millisecond)
	if s.Acquired == 0 || s.Errors != 0 || s.NotAcquired != 0 {
		t.Fatalf("%+v: want some cycles, no failures", s)
	}
}

// TestNotAcquired: a held key is a "not acquired" outcome, not a failure.
func TestNotAcquired(t *testing.T) {
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	held, err := e.TryLock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	err = bench.Engine(e).Cycle(ctx, "held", false)
	if !errors.Is(err, bench.ErrNotAcquired) || !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("cycle on a held key: %v, want bench.ErrNotAcquired wrapping api.ErrNotAcquired", err)
	}
	rec := bench.NewRecorder()
	rec.Record(0, time.Millisecond, err)
	rec.Record(1, time.Millisecond, errors.New("boom"))
	if a, n, f := rec.Counts(); a != 0 || n != 1 || f != 1 || !strings.Contains(rec.FirstErr().Error(), "boom") {
		t.Errorf("counts %d/%d/%d, first error %v: want 0 acquired, 1 not acquired, 1 failure (boom)", a, n, f, rec.FirstErr())
	}
}
