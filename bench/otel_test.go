package bench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	mnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
)

// telemetryVariants are the engines BenchmarkOTel compares:
//
//	none    no option: the global providers, which nobody set
//	noop    explicit no-op meter and tracer providers
//	metrics the SDK's meter provider with a manual reader (never read)
//	sdk     that, and the SDK's tracer provider sampling every span into a
//	        batch processor whose exporter drops them
func telemetryVariants(b *testing.B) []telemetryVariant {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	return []telemetryVariant{
		{name: "none"},
		{name: "noop", opts: []api.Option{api.WithMeterProvider(mnoop.NewMeterProvider()), api.WithTracerProvider(tnoop.NewTracerProvider())}},
		{name: "metrics", opts: []api.Option{api.WithMeterProvider(mp)}},
		{name: "sdk", opts: []api.Option{api.WithMeterProvider(mp), api.WithTracerProvider(tp)}},
	}
}

type telemetryVariant struct {
	name string
	opts []api.Option
}

// slowEnv, when set, raises the master timeout and the TTL of BenchmarkOTel's
// engines: under valgrind (bench/otel-count.sh) a cycle is ~100 times slower,
// and with the defaults most cycles time out or expire, so the counted
// instructions would be those of failures, not of lock cycles.
const slowEnv = "REDLOCK_BENCH_SLOW"

// BenchmarkOTel measures what telemetry costs a lock cycle on Redis (see
// telemetryVariants), at 1 and 256 lockers on fresh keys. Compare builds by
// cpu-us/cycle in interleaved runs (bench/interleave.sh):
//
//	go test -run '^$' -bench OTel -benchmem ./bench
func BenchmarkOTel(b *testing.B) {
	nodes := benchtest.RedisNodes(b)
	for _, v := range telemetryVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			opts := append(v.opts, api.WithoutRestartQuarantine())
			var lockOpts []api.LockOption
			if os.Getenv(slowEnv) != "" {
				opts = append(opts, api.WithMasterTimeout(time.Minute))
				lockOpts = append(lockOpts, api.WithTTL(10*time.Minute))
			}
			e, err := engine.New(nodes, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			client := bench.Engine(e, lockOpts...)
			prefix := bench.RunPrefix("otel-" + v.name)
			if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
				b.Fatal(err)
			}
			for _, c := range []int{1, 256} {
				w := bench.Uncontended(c, prefix+"u"+strconv.Itoa(c)+":")
				b.Run(w.Name(), func(b *testing.B) { benchtest.RunWorkload(b, client, w) })
			}
		})
	}
}

// BenchmarkOTelAllocs runs Lock and Unlock in one goroutine on five
// in-memory masters: its allocs/op is the allocation count of one cycle,
// which does not depend on the machine's load.
func BenchmarkOTelAllocs(b *testing.B) {
	for _, v := range telemetryVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			e, err := engine.NewMemory(5, v.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := e.Lock(ctx, "k")
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
