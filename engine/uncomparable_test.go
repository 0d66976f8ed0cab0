package engine_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// taggedTransport cannot be compared: it has a slice.
type taggedTransport struct {
	transport.Transport
	tags []string
}

// valueWrapper is a wrapper used by value, as users write them: its type is
// comparable (one interface field), but comparing two of them panics when
// both hold an incomparable value such as a taggedTransport.
type valueWrapper struct{ transport.Transport }

// A wrapper like that is a transport like any other: the constructor's check
// for a master given twice must not compare it.
func TestNewWithTransportsTakesValueWrappers(t *testing.T) {
	var ts []transport.Transport
	for range 3 {
		ts = append(ts, valueWrapper{taggedTransport{memory.New().Transport(), nil}})
	}
	e, err := engine.NewWithTransports(ts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type taggedProvider struct {
	trace.TracerProvider
	tags []string
}

type providerWrapper struct{ trace.TracerProvider }

// The same for a global tracer provider: the engine remembers the last one it
// saw and compares it with the current one on every call.
func TestGlobalTracerProviderOfAnIncomparableValue(t *testing.T) {
	otel.SetTracerProvider(providerWrapper{taggedProvider{tnoop.NewTracerProvider(), nil}})
	t.Cleanup(func() { otel.SetTracerProvider(tnoop.NewTracerProvider()) })
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, key := range []string{"a", "b"} { // the second compares with the first
		l, err := e.TryLock(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
