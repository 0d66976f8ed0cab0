package bench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
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
		{name: "metrics", opts: []api.Option{api.WithMeterProvider(mp)}, reader: reader},
		{name: "sdk", opts: []api.Option{api.WithMeterProvider(mp), api.WithTracerProvider(tp)}, reader: reader},
	}
}

type telemetryVariant struct {
	name   string
	opts   []api.Option
	reader *sdkmetric.ManualReader // the metrics SDK's reader, if any
}

// batchTotals reads the ops and the batches redlock.master.batch.size has
// recorded so far, over every master (0, 0 without a reader).
func batchTotals(b *testing.B, r *sdkmetric.ManualReader) (ops, batches int64) {
	if r == nil {
		return 0, 0
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		b.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok && m.Name == "redlock.master.batch.size" {
				for _, p := range h.DataPoints {
					ops += p.Sum
					batches += int64(p.Count)
				}
			}
		}
	}
	return ops, batches
}

// reportBatches reports the mean batch size and the batches per cycle of
// a run of n cycles that moved the batch totals from (ops0, batches0):
// per-batch costs weigh per cycle by batches/cycle, so a count of
// instructions per cycle is only comparable at like batch sizes.
func reportBatches(b *testing.B, r *sdkmetric.ManualReader, n int, ops0, batches0 int64) {
	if r == nil || n == 0 {
		return
	}
	ops1, batches1 := batchTotals(b, r)
	if batches1 > batches0 {
		b.ReportMetric(float64(ops1-ops0)/float64(batches1-batches0), "ops/batch")
		b.ReportMetric(float64(batches1-batches0)/float64(n), "batches/cycle")
	}
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
			if os.Getenv(slowEnv) != "" {
				opts = append(opts, api.WithMasterTimeout(time.Minute), api.WithTTL(10*time.Minute))
			}
			e, err := engine.New(nodes, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			client := bench.Engine(e)
			prefix := bench.RunPrefix("otel-" + v.name)
			if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
				b.Fatal(err)
			}
			for _, c := range []int{1, 256} {
				w := bench.Uncontended(c, prefix+"u"+strconv.Itoa(c)+":")
				b.Run(w.Name(), func(b *testing.B) {
					ops0, batches0 := batchTotals(b, v.reader)
					benchtest.RunWorkload(b, client, w)
					reportBatches(b, v.reader, b.N, ops0, batches0)
				})
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
			ops0, batches0 := batchTotals(b, v.reader)
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
			b.StopTimer()
			reportBatches(b, v.reader, b.N, ops0, batches0)
		})
	}
}

// BenchmarkOTelSDKCall is one synchronous call of the metrics SDK as the
// engine makes it: a histogram Record and a counter Add with a prebuilt
// attribute set of three attributes (metric.WithAttributeSet), under the
// SDK's default exemplar filter (trace-based: it asks the context for a
// sampled span) and with exemplars off (exemplar.AlwaysOffFilter, an
// application's choice). bench/otel-count.sh counts its instructions per
// call (BENCH='OTelSDKCall/%s$', variants histogram, histogram-noexemplar,
// counter, counter-noexemplar): the engine's metrics cost is about that
// much per call, times the calls per cycle.
func BenchmarkOTelSDKCall(b *testing.B) {
	set := attribute.NewSet(attribute.String("redlock.call", "lock"), attribute.Bool("redlock.fenced", false),
		attribute.String("redlock.outcome", "acquired"))
	for _, exemplars := range []bool{true, false} {
		var opts []sdkmetric.Option
		suffix := ""
		if !exemplars {
			opts = append(opts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
			suffix = "-noexemplar"
		}
		mp := sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithReader(sdkmetric.NewManualReader()))...)
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		meter := mp.Meter("bench")
		h, err := meter.Float64Histogram("h", metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
		if err != nil {
			b.Fatal(err)
		}
		c, err := meter.Int64Counter("c")
		if err != nil {
			b.Fatal(err)
		}
		ropts := []metric.RecordOption{metric.WithAttributeSet(set)}
		aopts := []metric.AddOption{metric.WithAttributeSet(set)}
		b.Run("histogram"+suffix, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h.Record(ctx, 0.003, ropts...)
			}
		})
		// Every goroutine records into one series, as the lockers do on all
		// cores: the SDK's atomics on the series' cache lines then move
		// between cores, which instruction counts do not see (ns/op is
		// wall time per Record; times GOMAXPROCS for its CPU).
		b.Run("histogram-parallel"+suffix, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					h.Record(ctx, 0.003, ropts...)
				}
			})
		})
		b.Run("counter"+suffix, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.Add(ctx, 1, aopts...)
			}
		})
	}
}
