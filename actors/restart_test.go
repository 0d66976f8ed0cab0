package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/goleak"
)

// A bug that panics in a node's Receive makes protoactor restart the node
// (the same *node) and lose the message that panicked. Locks must keep
// working through it: every Lock and Unlock of the lockers running at the
// time finishes without error (no reply lost: an Unlock waits for every
// master); a later lock is granted again by the node that restarted (its
// Unlock finds the key on all five masters); no key is left on any master
// after the Unlocks; and Close returns without leaving a goroutine. One
// case per message that carries work the node owes an answer for: a
// returned batch (its results), a wake-up (ops in the intake), an INFO
// result (the quarantine's check, which batches wait for); and a panic
// further in, from a user's meter as a returned batch is counted (after
// its slot in flight was given back, before its results went out).
func TestNodeRestartAfterPanic(t *testing.T) {
	for _, kind := range []string{"batch", "wakeNode", "infoResult", "metrics"} {
		t.Run(kind, func(t *testing.T) { testNodeRestart(t, kind) })
	}
}

func testNodeRestart(t *testing.T, kind string) {
	const masters, victim, lockers, before, after = 5, 2, 8, 10, 20
	const wait = 20 * time.Second // a call's bound: generous, it only catches a lost reply
	ms, ts, names := memoryMasters(masters)
	var armed, fired atomic.Bool
	panicked := make(chan struct{})
	boom := func() {
		if fired.CompareAndSwap(false, true) {
			close(panicked)
			panic("node18: a bug in the node's Receive")
		}
	}
	testNodeHook = func(n *node, msg any) {
		if n.t != ts[victim] || !armed.Load() {
			return
		}
		match := false
		switch msg.(type) {
		case *batch:
			match = kind == "batch"
		case *wakeNode:
			// With nothing in flight, no returning batch would take
			// the intake either: only the restart can.
			match = kind == "wakeNode" && n.inflight == 0
		case *infoResult:
			match = kind == "infoResult"
		}
		if match {
			boom()
		}
	}
	closed := false
	defer func() {
		if closed { // else a node may still run and read it
			testNodeHook = nil
		}
	}()
	if kind == "infoResult" {
		armed.Store(true) // the first read is the node's own, at Started
	}
	cfg := Config{Transports: ts, Names: names, MasterTimeout: 2 * time.Second, MaxBatch: 16, MaxInFlight: 2, Coordinators: 2}
	if kind != "wakeNode" {
		// The quarantine's reads, every CheckInterval, take the intake
		// too: with them a lost wake-up would cost only a wait.
		cfg.QuarantinePeriod, cfg.CheckInterval = time.Nanosecond, 20*time.Millisecond
	}
	if kind == "metrics" {
		h := &panicHist{fire: func() {
			if armed.Load() {
				boom()
			}
		}}
		m, err := NewMetrics(panicProvider{h: h}, names)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Metrics = m
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	retry := api.Retry{MaxAttempts: 5, InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond, Multiplier: 2}
	// run submits one call and waits for its end; false if it never came.
	run := func(ck CallKind, key, value string) (*Call, bool) {
		call := NewCall(ck, "test", key, value, time.Minute, time.Millisecond)
		call.Retry = retry
		if err := c.Submit(call); err != nil {
			t.Errorf("Submit %q: %v", key, err)
			return nil, false
		}
		select {
		case <-call.Done():
			return call, true
		case <-time.After(wait):
			t.Errorf("a call (%v %q) did not finish in %v: a master's reply was lost", ck, key, wait)
			return nil, false
		}
	}

	var warm, wg sync.WaitGroup
	warm.Add(lockers)
	stop := make(chan struct{})
	for g := range lockers {
		wg.Go(func() {
			key := fmt.Sprintf("%s-%d", kind, g)
			warmed, since := false, 0
			for i := 0; ; i++ {
				val := fmt.Sprintf("v%d", i)
				acq, ok := run(Acquire, key, val)
				if !ok {
					break
				}
				if acq.Err != nil {
					t.Errorf("locker %d, lock %d: %v", g, i, acq.Err)
					break
				}
				rel, ok := run(Release, key, val)
				if !ok {
					break
				}
				if rel.Err != nil {
					t.Errorf("locker %d, unlock %d: %v", g, i, rel.Err)
					break
				}
				if i+1 == before {
					warmed = true
					warm.Done()
				}
				select {
				case <-panicked:
					if since++; since >= after {
						return
					}
				case <-stop:
					return
				default:
				}
			}
			if !warmed {
				warm.Done()
			}
		})
	}
	warm.Wait()
	armed.Store(true)
	select {
	case <-panicked:
	case <-time.After(wait):
		t.Errorf("the node never handled a %s to panic on", kind)
		close(stop)
	}
	wg.Wait()

	// A lock taken after the restart: every master grants it, the one
	// that restarted too.
	if !t.Failed() {
		// The lock is granted once a majority has; its Unlock waits for
		// every master, and a master's release counts (grants) only if
		// it held the key.
		if acq, ok := run(Acquire, "after-"+kind, "last"); ok {
			if acq.Err != nil {
				t.Errorf("a lock after the restart: %v", acq.Err)
			} else if rel, ok := run(Release, "after-"+kind, "last"); ok && (rel.Err != nil || rel.grants != 1<<masters-1) {
				t.Errorf("its unlock: err %v, released by masters %05b (bit i: master i), want all five", rel.Err, rel.grants)
			}
		}
	}
	for i, m := range ms {
		if k := m.Len(); k != 0 {
			t.Errorf("master %d holds %d keys after every Unlock", i, k)
		}
	}

	if closed = closeWithin(t, c, 30*time.Second); !closed {
		t.Fatalf("Close did not return in 30s after the node restarted (its old workers wait on a channel no one sends to)")
	}
	goleak.VerifyNone(t)
}

// panicProvider is a user's MeterProvider with a bug: the histogram of
// batch round trips, which a node records as a batch returns
// (Metrics.returned), runs fire, which may panic.
type panicProvider struct {
	noop.MeterProvider
	h *panicHist
}

func (p panicProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return panicMeter{h: p.h}
}

type panicMeter struct {
	noop.Meter
	h *panicHist
}

func (m panicMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if name == "redlock.master.batch.duration" {
		return m.h, nil
	}
	return m.Meter.Float64Histogram(name, opts...)
}

type panicHist struct {
	noop.Float64Histogram
	fire func()
}

func (h *panicHist) Enabled(context.Context) bool { return true }

func (h *panicHist) Record(context.Context, float64, ...metric.RecordOption) { h.fire() }
