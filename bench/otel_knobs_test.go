package bench_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// BenchmarkOTelKnobs is BenchmarkOTelAllocs's cycle (Lock and Unlock, one
// goroutine, five in-memory masters: ten one-op batches a cycle, the case
// where per-batch telemetry weighs most) under the SDK configured by the
// application in ways that cut what the engine's metrics cost, each
// keeping every other metric as it is:
//
//	metrics     the SDK's defaults with a manual reader (as in BenchmarkOTel)
//	noexemplar  exemplars off (sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
//	nobatch     a View that drops redlock.master.batch.* (the two per-batch
//	            histograms; the engine asks Enabled and skips them)
//	lean        both
//
// bench/otel-count.sh counts them (BENCH='OTelKnobs/%s$'); BENCHMARKS.md
// "otel17" has the figures.
func BenchmarkOTelKnobs(b *testing.B) {
	dropBatch := sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "redlock.master.batch.*"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}}))
	noExemplar := sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)
	for _, v := range []struct {
		name string
		opts []sdkmetric.Option
	}{
		{"metrics", nil},
		{"noexemplar", []sdkmetric.Option{noExemplar}},
		{"nobatch", []sdkmetric.Option{dropBatch}},
		{"lean", []sdkmetric.Option{noExemplar, dropBatch}},
	} {
		b.Run(v.name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(append(v.opts, sdkmetric.WithReader(sdkmetric.NewManualReader()))...)
			defer func() { _ = mp.Shutdown(context.Background()) }()
			e, err := engine.NewMemory(5, api.WithMeterProvider(mp))
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
