package otelglobal_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// The global providers as the process started: OpenTelemetry's delegates,
// which forward to the providers set later.
var (
	startMP = otel.GetMeterProvider()
	startTP = otel.GetTracerProvider()
)

// An application that passes otel.GetMeterProvider() and
// otel.GetTracerProvider() explicitly, before it installs the SDK globally,
// passes the global delegates: they forward to the SDK once it is set, as
// the implicit global providers do, and the engine must not take them for
// no-op providers for good.
func TestExplicitGlobalProvidersSetLater(t *testing.T) {
	if otel.GetMeterProvider() != startMP || otel.GetTracerProvider() != startTP {
		t.Skip("the global providers were set already in this process (-count > 1?)")
	}
	e, err := engine.NewMemory(3, api.WithMeterProvider(otel.GetMeterProvider()), api.WithTracerProvider(otel.GetTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)

	ctx := context.Background()
	l, err := e.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var acquires uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "redlock.lock.acquire.duration" {
				for _, p := range h.DataPoints {
					acquires += p.Count
				}
			}
		}
	}
	if acquires != 1 {
		t.Errorf("redlock.lock.acquire.duration: %d recorded, want 1 (the Lock)", acquires)
	}
	var names []string
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"redlock.Lock", "redlock.Unlock"}) {
		t.Errorf("spans %q, want redlock.Lock and redlock.Unlock", names)
	}
}
