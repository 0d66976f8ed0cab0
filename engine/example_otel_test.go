package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sort"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// Example_openTelemetry wires the OpenTelemetry SDK to the engine with the
// stdout exporters. A program would leave WithWriter out (they write to
// os.Stdout) or use an OTLP or Prometheus exporter instead; or it would set
// the global providers (otel.SetMeterProvider, otel.SetTracerProvider) and
// give the engine no option at all. Here the exporters write to buffers,
// and the example prints what they received: the names of the spans and
// of the metrics (OBSERVABILITY.md describes each).
func Example_openTelemetry() {
	ctx := context.Background()
	var metrics, spans bytes.Buffer
	mexp, err := stdoutmetric.New(stdoutmetric.WithWriter(&metrics))
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)))
	texp, err := stdouttrace.New(stdouttrace.WithWriter(&spans))
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp))

	e, err := engine.NewMemory(3, api.WithMeterProvider(mp), api.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	l, err := e.Lock(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Shutting the meter provider down exports what it holds; the engine
	// is closed after, so that its gauges are still observed.
	if err := mp.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	if err := e.Close(); err != nil {
		log.Fatal(err)
	}

	dec := json.NewDecoder(&spans)
	for dec.More() {
		var s struct{ Name string }
		if err := dec.Decode(&s); err != nil {
			log.Fatal(err)
		}
		fmt.Println("span", s.Name)
	}
	var rm struct {
		ScopeMetrics []struct{ Metrics []struct{ Name string } }
	}
	if err := json.Unmarshal(metrics.Bytes(), &rm); err != nil {
		log.Fatal(err)
	}
	var names []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println("metric", n)
	}
	// Output:
	// span redlock.Lock
	// span redlock.Unlock
	// metric redlock.lock.acquire.attempts
	// metric redlock.lock.acquire.duration
	// metric redlock.lock.held
	// metric redlock.lock.hold.duration
	// metric redlock.lock.unlocks
	// metric redlock.lock.validity
	// metric redlock.lock.waiters
	// metric redlock.master.batch.duration
	// metric redlock.master.batch.size
	// metric redlock.master.ops
	// metric redlock.master.ops.inflight
	// metric redlock.master.ops.queued
	// metric redlock.master.quarantine.remaining
	// metric redlock.master.quarantined
	// metric redlock.master.reachable
	// metric redlock.master.voting
}
