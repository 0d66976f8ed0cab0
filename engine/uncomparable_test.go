package engine_test

import (
	"context"
	"errors"
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

// taggedCtx is a context whose type cannot be compared, as a user's own
// context type may be (a slice of tags beside the parent).
type taggedCtx struct {
	context.Context
	tags []string
}

// Unlock takes any context: one of an incomparable type, live or ended,
// must not make it panic (it compared the ctx it was given with the
// bounded one it makes for an ended ctx).
func TestUnlockTakesAnIncomparableContext(t *testing.T) {
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error // besides nil
	}{
		{"live", taggedCtx{context.Background(), []string{"a"}}, nil},
		{"ended", taggedCtx{ended, []string{"a"}}, context.Canceled},
	} {
		l, err := e.TryLock(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Unlock with a %s incomparable ctx panicked: %v", c.name, r)
				}
			}()
			if err := l.Unlock(c.ctx); err != nil && (c.want == nil || !errors.Is(err, c.want)) {
				t.Errorf("Unlock with a %s incomparable ctx: %v", c.name, err)
			}
		}()
	}
}
