package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/metric"
	mnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// Close must not return while a goroutine of the engine still runs: a
// caller that checks for leaked goroutines right after it (goleak), or
// that shuts its meter provider down next, must find the engine's
// goroutines gone. An auto-extension runs on a scheduler worker, which
// records its outcome through the user's meter once the extension's call
// has ended; a meter that takes its time there (a synchronous exporter, a
// lock of the user's) kept the worker alive after Close had returned.
//
// The test's meter blocks in the extensions counter until the test lets
// it go, with Close called meanwhile. In a synctest bubble both wait
// durably, so synctest.Wait tells whether Close returned with the worker
// still inside the meter.
func TestCloseWaitsForAutoExtensionWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &meterGate{entered: make(chan struct{}), release: make(chan struct{})}
		_, ts := memoryMasters(3)
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMeterProvider(gateMeterProvider{g: g}))
		if err != nil {
			t.Fatal(err)
		}
		l, err := e.TryLock(context.Background(), "k24", api.WithTTL(time.Second), api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		g.armed.Store(true)
		select {
		case <-g.entered: // the first auto-extension, due 500ms after the grant, is being recorded
		case <-l.Done():
			t.Fatalf("the lock ended before its first auto-extension was recorded: %v", l.Err())
		}
		closed := make(chan error, 1)
		go func() { closed <- e.Close() }()
		synctest.Wait()
		select {
		case err := <-closed:
			close(g.release)
			t.Fatalf("engine.Close returned (err %v) while a scheduler worker was still running an auto-extension (blocked in the user's meter): the worker outlives Close", err)
		default:
		}
		close(g.release)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

// meterGate blocks the first Add on the extensions counter after armed is
// set, until release is closed.
type meterGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *meterGate) pass() {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
}

// gateMeterProvider is a user's meter provider whose only working
// instrument is the engine's extensions counter, which passes the gate.
// Not a no-op provider's type, so the engine records through it.
type gateMeterProvider struct {
	mnoop.MeterProvider
	g *meterGate
}

func (p gateMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return gateMeter{g: p.g}
}

type gateMeter struct {
	mnoop.Meter
	g *meterGate
}

func (m gateMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if name == "redlock.lock.extensions" {
		return gateCounter{g: m.g}, nil
	}
	return mnoop.Int64Counter{}, nil
}

type gateCounter struct {
	mnoop.Int64Counter
	g *meterGate
}

func (c gateCounter) Add(context.Context, int64, ...metric.AddOption) { c.g.pass() }
