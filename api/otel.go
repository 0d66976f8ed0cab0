package api

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Observability settings live in Options (MeterProvider, TracerProvider,
// TraceKeys). They take the OpenTelemetry API's provider interfaces, which
// is why this package imports go.opentelemetry.io/otel/metric and
// go.opentelemetry.io/otel/trace: two interface packages with no SDK, no
// exporter and nothing that starts a goroutine. Taking the interfaces here,
// rather than in package engine, keeps every setting an Option checked in
// one place and lets code that only passes options around configure
// telemetry too; OBSERVABILITY.md lists what is measured.

// WithMeterProvider sends the engine's metrics to mp. Without it the engine
// uses the global provider (otel.GetMeterProvider), the convention for
// instrumented libraries: an application that sets one up gets redlock's
// metrics with no code. A no-op provider (go.opentelemetry.io/otel/metric/noop)
// turns metrics off. otel.GetMeterProvider() passed before a global
// provider is set is the global provider: the engine's metrics reach the
// provider set later, as without the option. A nil mp is refused, and a
// provider that fails to make the engine's instruments fails the
// constructor with ErrInvalidArgument (its error in the chain).
// Engine-wide.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return setting(func(o *Options) error {
		if mp == nil {
			return invalid("meter provider is nil: pass one, or leave the option out to use the global provider")
		}
		o.MeterProvider = mp
		return nil
	})
}

// WithTracerProvider sends the engine's spans to tp; without it the engine
// uses the global provider (otel.GetTracerProvider). As for
// WithMeterProvider, otel.GetTracerProvider() passed before a global
// provider is set is the global provider. A nil tp is refused. Engine-wide.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return setting(func(o *Options) error {
		if tp == nil {
			return invalid("tracer provider is nil: pass one, or leave the option out to use the global provider")
		}
		o.TracerProvider = tp
		return nil
	})
}

// WithTraceKeys puts lock keys on the engine's spans (attribute
// redlock.key, or redlock.keys for a multi-key lock). Off by default, since
// keys may hold user data (an account id, an e-mail address) that should
// not leave the process. Metrics never carry keys. Engine-wide.
func WithTraceKeys(on bool) Option {
	return setting(func(o *Options) error {
		o.TraceKeys = on
		return nil
	})
}
