package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// minimal is a transport of the three required ops (Acquire, Release and
// Extend on single keys) over a memory master, as a plugin written in an
// afternoon would be: no transport.Capabler, and every other op answered
// with transport.CheckFor's ErrUnsupported. It counts the such ops it gets,
// which the engine must never send.
type minimal struct {
	c           transport.Transport
	unsupported atomic.Int32
}

func (m *minimal) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for i := range ops {
		if err := transport.CheckFor(&ops[i], 0); errors.Is(err, errors.ErrUnsupported) {
			m.unsupported.Add(1)
		}
	}
	// The memory master would apply them; a minimal master cannot, so
	// answer them the way it would.
	if err := m.c.Do(ctx, ops, res); err != nil {
		return err
	}
	for i := range ops {
		if err := transport.CheckFor(&ops[i], 0); errors.Is(err, errors.ErrUnsupported) {
			res[i] = transport.Result{Err: err}
		}
	}
	return nil
}

func (m *minimal) Close() error { return m.c.Close() }

// named gives a transport a name.
type named struct {
	transport.Transport
	name string
}

func (n named) Name() string { return n.name }

// mixed returns three masters: a full memory master "full", a minimal one
// without a name (so "master 2") and a minimal one named "small".
func mixed() ([]transport.Transport, []*minimal) {
	m2 := &minimal{c: memory.New().Transport()}
	m3 := &minimal{c: memory.New().Transport()}
	return []transport.Transport{memory.NewNamed("full").Transport(), m2, named{m3, "small"}}, []*minimal{m2, m3}
}

// wantRefusal checks that err is an ErrInvalidArgument that names the
// minimal masters, and only those, and says what to do.
func wantRefusal(t *testing.T, what string, err error, capability string) {
	t.Helper()
	var ae *api.Error
	if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &ae) {
		t.Fatalf("%s: %v, want an *api.Error wrapping ErrInvalidArgument", what, err)
	}
	msg := err.Error()
	for _, want := range []string{"master 2, small", "transport." + capability} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
	}
	if strings.Contains(msg, "full") {
		t.Errorf("%s: %q names the master that has the capability", what, msg)
	}
}

func TestMinimalTransportsAtConstruction(t *testing.T) {
	ts, _ := mixed()
	_, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithFencing(true))
	wantRefusal(t, "NewWithTransports(WithFencing(true)) over minimal masters", err, "Fencing")
	if err != nil && !strings.Contains(err.Error(), "fencing") {
		t.Errorf("the refusal %q does not name the feature", err)
	}
}

func TestMinimalTransportsAtCallTime(t *testing.T) {
	ctx := t.Context()
	ts, mins := mixed()
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatalf("NewWithTransports over minimal masters without fencing: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })

	// The three ops are all a single-key lock needs.
	l, err := e.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("Lock over minimal masters: %v", err)
	}
	if err := l.Extend(ctx); err != nil {
		t.Errorf("Extend: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	one, err := e.LockAll(ctx, []string{"only"})
	if err != nil {
		t.Fatalf("LockAll of one key over minimal masters: %v", err)
	}
	_ = one.Unlock(ctx)

	// What needs more is refused before anything is sent.
	_, err = e.Lock(ctx, "k", api.WithFencing(true))
	wantRefusal(t, "Lock(WithFencing(true))", err, "Fencing")
	_, err = e.TryLock(ctx, "k", api.WithFencing(true))
	wantRefusal(t, "TryLock(WithFencing(true))", err, "Fencing")
	_, err = e.LockAll(ctx, []string{"a", "b"})
	wantRefusal(t, "LockAll of two keys", err, "MultiKey")
	_, err = e.TryLockAll(ctx, []string{"a", "b"})
	wantRefusal(t, "TryLockAll of two keys", err, "MultiKey")
	for i, m := range mins {
		if n := m.unsupported.Load(); n > 0 {
			t.Errorf("minimal master %d was sent %d ops it lacks", i+2, n)
		}
	}
	// The refused keys were never taken.
	for _, k := range []string{"k", "a", "b"} {
		l, err := e.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("TryLock(%q) after the refusals: %v", k, err)
		}
		_ = l.Unlock(ctx)
	}
}

// TestFullTransportsDeclareCapabilities: over masters that declare both, the
// same calls are granted (memory here; Redis in the transports' own tests).
func TestFullTransportsDeclareCapabilities(t *testing.T) {
	e := newMemory(t, 3, api.WithFencing(true))
	ctx := t.Context()
	l, err := e.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("fenced Lock over memory masters: %v", err)
	}
	if l.Token() < 1 {
		t.Errorf("fenced Lock over memory masters: token %d, want one", l.Token())
	}
	_ = l.Unlock(ctx)
	all, err := e.LockAll(ctx, []string{"a", "b"}, api.WithFencing(false))
	if err != nil {
		t.Fatalf("LockAll over memory masters: %v", err)
	}
	_ = all.Unlock(ctx)
}

// The other tests' wrappers embed transport.Transport, which hides the
// wrapped master's Capabilities (an optional interface is lost by any
// wrapper that does not forward it), so they forward them.

func (g *gateExtends) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(g.Transport)
}

func (w *watchAcquires) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(w.Transport)
}

func (s *slowExtends) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(s.Transport)
}

func (s *scripted) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(s.Transport)
}

// TestMinimalTransportsAreNotQuarantined: a master whose transport is no
// transport.ServerReporter cannot be quarantined, and the engine says so,
// once per such master, naming it.
func TestMinimalTransportsAreNotQuarantined(t *testing.T) {
	ts, _ := mixed()
	logs := &logRecords{}
	e, err := engine.NewWithTransports(ts, api.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	if n := logs.count(slog.LevelWarn, "not quarantined after a restart"); n != 2 {
		t.Fatalf("%d warnings about masters that cannot be quarantined, want 2 (master 2 and small)", n)
	}
	var named []string
	logs.mu.Lock()
	for _, r := range logs.recs {
		if r.Level == slog.LevelWarn && strings.Contains(r.Message, "not quarantined after a restart") {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "master" {
					named = append(named, a.Value.String())
				}
				return true
			})
		}
	}
	logs.mu.Unlock()
	if strings.Join(named, ",") != "master 2,small" {
		t.Errorf("the warnings name masters %q, want master 2 and small", named)
	}
}
