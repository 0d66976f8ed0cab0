package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/metric"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// The error contract, case by case (api/errors.go, api/api.go): every error
// the engine returns wraps exactly one sentinel, or a context error and
// then, after a Lock that made attempts, its last attempt's sentinel; and
// it comes as an *api.Error (Close's error is the one exception, as
// api.Locker.Close says). ErrExpired and ErrReleased are kinds of
// ErrNotHeld (both match), PanicError is ErrInternal. TestErrorSentinels
// drives every public entry point under every cause the in-memory masters
// can be made to produce, and checks what errors.Is finds: the documented
// sentinels and nothing else.

// ctlMode is how a ctl master misbehaves.
type ctlMode int32

const (
	modeUp           ctlMode = iota
	modeDown                 // every batch fails at once: unreachable
	modeErrorReply           // every op is answered with an error reply (OOM)
	modeRefuseExtend         // every Extend is answered "not held"
	modeDownExtend           // every batch with an Extend fails: unreachable
	modeHangExtend           // every batch with an Extend waits for its ctx
	modeHang                 // every batch waits for its ctx: slow masters
	modePanic                // Do panics
)

// ctl is an in-memory master that a case switches into failing (mode,
// shared by the rig's masters), that may say it replicates another server,
// and whose Close may fail. It keeps the memory master's name,
// capabilities and server reports.
type ctl struct {
	transport.Transport
	mode     *atomic.Int32
	replica  bool
	closeErr error
}

var errCloseFailed = errors.New("sentinels_test: close failed")

var errOOM = errors.New("OOM command not allowed when used memory > 'maxmemory'")

func (c *ctl) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	switch ctlMode(c.mode.Load()) {
	case modeDown:
		return transport.Fail(res, fmt.Errorf("%w: test: down", transport.ErrUnavailable))
	case modeErrorReply:
		for i := range res {
			res[i] = transport.Result{Err: transport.Reply(errOOM)}
		}
		return nil
	case modeRefuseExtend:
		if err := c.Transport.Do(ctx, ops, res); err != nil {
			return err
		}
		for i, op := range ops {
			if op.Kind == transport.Extend {
				res[i] = transport.Result{}
			}
		}
		return nil
	case modeDownExtend:
		if hasExtend(ops) {
			return transport.Fail(res, fmt.Errorf("%w: test: extensions cut off", transport.ErrUnavailable))
		}
	case modeHangExtend:
		if hasExtend(ops) {
			<-ctx.Done()
			return transport.Fail(res, ctx.Err())
		}
	case modeHang:
		<-ctx.Done()
		return transport.Fail(res, ctx.Err())
	case modePanic:
		panic("sentinels_test: the transport panicked")
	}
	return c.Transport.Do(ctx, ops, res)
}

func (c *ctl) Name() string { return c.Transport.(transport.Namer).Name() }
func (c *ctl) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(c.Transport)
}
func (c *ctl) Epoch() uint64 { return c.Transport.(transport.ServerReporter).Epoch() }
func (c *ctl) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	si, err := c.Transport.(transport.ServerReporter).ServerInfo(ctx)
	if c.replica {
		si.ReplicaOf = "10.0.0.9:6379"
	}
	return si, err
}
func (c *ctl) Close() error { return errors.Join(c.Transport.Close(), c.closeErr) }

// bare is a master that declares no optional capability.
type bare struct{ transport.Transport }

// rig is an engine over three ctl masters, quarantine off, TTL 1s.
type rig struct {
	e    *engine.Engine
	mode atomic.Int32
	ms   []*ctl
}

var quiet = api.WithLogger(slog.New(slog.DiscardHandler))

func newRig(t *testing.T, setup func(i int, c *ctl), opts ...api.Option) *rig {
	t.Helper()
	r := &rig{}
	ts := make([]transport.Transport, 3)
	for i := range ts {
		c := &ctl{Transport: memory.NewNamed(fmt.Sprintf("m%d", i+1)).Transport(), mode: &r.mode}
		if setup != nil {
			setup(i, c)
		}
		r.ms = append(r.ms, c)
		ts[i] = c
	}
	e, err := engine.NewWithTransports(ts, append([]api.Option{api.WithoutRestartQuarantine(), api.WithTTL(time.Second), quiet}, opts...)...)
	if err != nil {
		t.Fatalf("NewWithTransports: %v", err)
	}
	r.e = e
	closeAtEnd(t, e)
	return r
}

// closeAtEnd closes e as the case's bubble ends, and lets the goroutine a
// dead letter starts as the actors stop (10ms, actors/cluster.go) end
// before the bubble does.
func closeAtEnd(t *testing.T, e *engine.Engine) {
	t.Cleanup(func() {
		_ = e.Close()
		time.Sleep(time.Second)
	})
}

func (r *rig) set(m ctlMode) { r.mode.Store(int32(m)) }

// lockMethod is one acquiring method of api.Locker.
type lockMethod struct {
	name string
	try  bool // one attempt
	call func(l api.Locker, ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error)
	// hold takes what makes key taken for this method.
	hold func(l api.Locker, ctx context.Context, key string) (api.Lock, error)
}

func holdLock(l api.Locker, ctx context.Context, key string) (api.Lock, error) {
	return l.TryLockAll(ctx, []string{key, key + "-2"})
}

func holdPermit(l api.Locker, ctx context.Context, key string) (api.Lock, error) {
	return l.TrySemaphore(ctx, key, 1)
}

var lockMethods = []lockMethod{
	{"Lock", false, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.Lock(ctx, k, o...)
	}, holdLock},
	{"TryLock", true, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.TryLock(ctx, k, o...)
	}, holdLock},
	{"LockAll", false, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.LockAll(ctx, []string{k, k + "-2"}, o...)
	}, holdLock},
	{"TryLockAll", true, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.TryLockAll(ctx, []string{k, k + "-2"}, o...)
	}, holdLock},
	{"RLock", false, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.RLock(ctx, k, o...)
	}, holdLock},
	{"TryRLock", true, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.TryRLock(ctx, k, o...)
	}, holdLock},
	{"WLock", false, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.WLock(ctx, k, o...)
	}, holdLock},
	{"TryWLock", true, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.TryWLock(ctx, k, o...)
	}, holdLock},
	{"Semaphore", false, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.Semaphore(ctx, k, 1, o...)
	}, holdPermit},
	{"TrySemaphore", true, func(l api.Locker, ctx context.Context, k string, o ...api.LockOption) (api.Lock, error) {
		return l.TrySemaphore(ctx, k, 1, o...)
	}, holdPermit},
}

// budget bounds a retrying method's attempts, so that it ends on its own.
var budget = api.WithMaxAttempts(2)

// boomSpans is a TracerProvider whose spans panic in AddEvent, which the
// coordinator calls (actors.roundEvent), once armed: a coordinator panic
// (coord19) through the public API, whose calls then end in ErrInternal.
type boomSpans struct {
	embedded.TracerProvider
	armed *atomic.Bool
}

func (p boomSpans) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return boomTracer{armed: p.armed}
}

type boomTracer struct {
	embedded.Tracer
	armed *atomic.Bool
}

func (t boomTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := boomSpan{armed: t.armed}
	return trace.ContextWithSpan(ctx, s), s
}

type boomSpan struct {
	tnoop.Span
	armed *atomic.Bool
}

func (s boomSpan) IsRecording() bool { return true }
func (s boomSpan) AddEvent(string, ...trace.EventOption) {
	if s.armed.CompareAndSwap(true, false) {
		panic("sentinels_test: a span event panicked")
	}
}

// refusingMeters is a MeterProvider whose meters refuse to make a
// histogram, as a provider may refuse an instrument.
type refusingMeters struct{ mnoop.MeterProvider }

func (refusingMeters) Meter(string, ...metric.MeterOption) metric.Meter { return refusingMeter{} }

type refusingMeter struct{ mnoop.Meter }

var errInstrument = errors.New("sentinels_test: instrument refused")

func (refusingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return mnoop.Float64Histogram{}, errInstrument
}

// sentinelCase is one way of getting an error out of the public API.
type sentinelCase struct {
	name string
	want []string // the sentinels errors.Is must find, in exportedSentinels order
	run  func(t *testing.T) error
	// answer, when set, is what some master's answer (Error.Masters) must
	// wrap: the case met the cause it is about.
	answer error
	// notAPIError: the error is documented to be something else than an
	// *api.Error, which wraps it.
	notAPIError error
}

var (
	wInvalid     = []string{"ErrInvalidArgument"}
	wTaken       = []string{"ErrNotAcquired"}
	wUnreachable = []string{"ErrQuorumUnreachable"}
	wNotHeld     = []string{"ErrNotHeld"}
	wExpired     = []string{"ErrNotHeld", "ErrExpired"}
	wReleased    = []string{"ErrNotHeld", "ErrReleased"}
	wClosed      = []string{"ErrClosed"}
	wInternal    = []string{"ErrInternal"}
	wCanceled    = []string{"context.Canceled"}
	wDeadline    = []string{"context.DeadlineExceeded"}
)

func sentinelCases() []sentinelCase {
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	var cs []sentinelCase
	add := func(name string, want []string, run func(t *testing.T) error) {
		cs = append(cs, sentinelCase{name: name, want: want, run: run})
	}
	// addA is add of a case whose masters' answers must show answer.
	addA := func(name string, want []string, answer error, run func(t *testing.T) error) {
		cs = append(cs, sentinelCase{name: name, want: want, run: run, answer: answer})
	}
	memTS := func(n int) []transport.Transport {
		ts := make([]transport.Transport, n)
		for i := range ts {
			ts[i] = memory.NewNamed(fmt.Sprintf("m%d", i+1)).Transport()
		}
		return ts
	}
	ctor := func(_ *engine.Engine, err error) error { return err }

	// Constructors with bad input.
	add("NewMemory/0 masters", wInvalid, func(t *testing.T) error { return ctor(engine.NewMemory(0)) })
	add("NewMemory/bad TTL", wInvalid, func(t *testing.T) error { return ctor(engine.NewMemory(3, api.WithTTL(-time.Second))) })
	add("NewMemory/nil tracer provider", wInvalid, func(t *testing.T) error { return ctor(engine.NewMemory(1, api.WithTracerProvider(nil))) })
	add("NewMemory/meter provider refuses instruments", wInvalid, func(t *testing.T) error {
		return ctor(engine.NewMemory(3, api.WithMeterProvider(refusingMeters{})))
	})
	add("NewWithTransports/none", wInvalid, func(t *testing.T) error { return ctor(engine.NewWithTransports(nil)) })
	add("NewWithTransports/nil transport", wInvalid, func(t *testing.T) error {
		return ctor(engine.NewWithTransports([]transport.Transport{memTS(1)[0], nil}))
	})
	add("NewWithTransports/one transport twice", wInvalid, func(t *testing.T) error {
		ts := memTS(1)
		return ctor(engine.NewWithTransports([]transport.Transport{ts[0], ts[0]}))
	})
	add("NewWithTransports/one server twice", wInvalid, func(t *testing.T) error {
		m := memory.NewNamed("one")
		var mode atomic.Int32
		a := &ctl{Transport: m.Transport(), mode: &mode}
		b := &renamed{ctl{Transport: m.Transport(), mode: &mode}, "two"}
		return ctor(engine.NewWithTransports([]transport.Transport{a, b}, api.WithoutRestartQuarantine()))
	})
	add("NewWithTransports/fencing without the capability", wInvalid, func(t *testing.T) error {
		return ctor(engine.NewWithTransports([]transport.Transport{bare{memTS(1)[0]}}, api.WithFencing(true)))
	})
	add("NewWithTransports/bad option", wInvalid, func(t *testing.T) error {
		return ctor(engine.NewWithTransports(memTS(3), api.WithMasterTimeout(0)))
	})
	add("New/no masters", wInvalid, func(t *testing.T) error { return ctor(engine.New(nil)) })
	add("New/bad address", wInvalid, func(t *testing.T) error { return ctor(engine.New([]string{"redis://[::1"})) })
	add("New/address twice", wInvalid, func(t *testing.T) error {
		return ctor(engine.New([]string{"127.0.0.1:1", "redis://127.0.0.1:1"}))
	})
	add("New/bad option", wInvalid, func(t *testing.T) error { return ctor(engine.New([]string{"127.0.0.1:1"}, api.WithCoordinators(0))) })

	// Every acquiring method under every cause.
	for _, m := range lockMethods {
		var opts []api.LockOption
		if !m.try {
			opts = []api.LockOption{budget}
		}
		add(m.name+"/taken", wTaken, func(t *testing.T) error {
			r := newRig(t, nil)
			if _, err := m.hold(r.e, bg, "k"); err != nil {
				t.Fatal(err)
			}
			_, err := m.call(r.e, bg, "k", opts...)
			return err
		})
		add(m.name+"/unreachable", wUnreachable, func(t *testing.T) error {
			r := newRig(t, nil)
			r.set(modeDown)
			_, err := m.call(r.e, bg, "k", opts...)
			return err
		})
		addA(m.name+"/error replies", wUnreachable, api.ErrErrorReply, func(t *testing.T) error {
			r := newRig(t, nil)
			r.set(modeErrorReply)
			_, err := m.call(r.e, bg, "k", opts...)
			return err
		})
		addA(m.name+"/quarantined", wUnreachable, api.ErrQuarantined, func(t *testing.T) error {
			e, err := engine.NewMemory(3, api.WithRestartQuarantine(time.Hour), api.WithTTL(time.Second), quiet)
			if err != nil {
				t.Fatal(err)
			}
			closeAtEnd(t, e)
			_, err = m.call(e, bg, "k", opts...)
			return err
		})
		addA(m.name+"/unsafe: replicas", wUnreachable, api.ErrUnsafeMaster, func(t *testing.T) error {
			r := newRig(t, func(i int, c *ctl) { c.replica = i > 0 })
			_, err := m.call(r.e, bg, "k", opts...)
			return err
		})
		add(m.name+"/invalid key", wInvalid, func(t *testing.T) error {
			r := newRig(t, nil)
			_, err := m.call(r.e, bg, "", opts...)
			return err
		})
		add(m.name+"/invalid option", wInvalid, func(t *testing.T) error {
			r := newRig(t, nil)
			_, err := m.call(r.e, bg, "k", api.WithTTL(-time.Second))
			return err
		})
		add(m.name+"/closed", wClosed, func(t *testing.T) error {
			r := newRig(t, nil)
			r.e.Close()
			_, err := m.call(r.e, bg, "k", opts...)
			return err
		})
		add(m.name+"/ctx cancelled", wCanceled, func(t *testing.T) error {
			r := newRig(t, nil)
			_, err := m.call(r.e, cancelled, "k", opts...)
			return err
		})
		add(m.name+"/internal error", wInternal, func(t *testing.T) error {
			var armed atomic.Bool
			r := newRig(t, nil, api.WithTracerProvider(boomSpans{armed: &armed}))
			armed.Store(true)
			_, err := m.call(r.e, bg, "k", opts...)
			return err
		})
		if m.try {
			continue
		}
		add(m.name+"/deadline while taken", []string{"ErrNotAcquired", "context.DeadlineExceeded"}, func(t *testing.T) error {
			r := newRig(t, nil)
			if _, err := m.hold(r.e, bg, "k"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
			defer cancel()
			_, err := m.call(r.e, ctx, "k")
			return err
		})
		add(m.name+"/deadline while unreachable", []string{"ErrQuorumUnreachable", "context.DeadlineExceeded"}, func(t *testing.T) error {
			r := newRig(t, nil)
			r.set(modeDown)
			ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
			defer cancel()
			_, err := m.call(r.e, ctx, "k")
			return err
		})
		add(m.name+"/cut by Close while taken", wClosed, func(t *testing.T) error {
			r := newRig(t, nil)
			if _, err := m.hold(r.e, bg, "k"); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := m.call(r.e, bg, "k")
				done <- err
			}()
			time.Sleep(100 * time.Millisecond) // a few refused attempts
			synctest.Wait()
			r.e.Close()
			return <-done
		})
		add(m.name+"/cut by Close while unreachable", wClosed, func(t *testing.T) error {
			r := newRig(t, nil)
			r.set(modeDown)
			done := make(chan error, 1)
			go func() {
				_, err := m.call(r.e, bg, "k")
				done <- err
			}()
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			r.e.Close()
			return <-done
		})
	}

	// Masters slow to answer: overload, retried for about a TTL.
	add("TryLock/masters slow", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		r.set(modeHang)
		_, err := r.e.TryLock(bg, "k")
		return err
	})
	add("Lock/deadline while masters slow", wDeadline, func(t *testing.T) error {
		r := newRig(t, nil)
		r.set(modeHang)
		ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
		defer cancel()
		_, err := r.e.Lock(ctx, "k")
		return err
	})
	add("TryLock/the transport panics", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		r.set(modePanic)
		_, err := r.e.TryLock(bg, "k")
		return err
	})
	add("TryLock/ctx past its deadline", wDeadline, func(t *testing.T) error {
		r := newRig(t, nil)
		ctx, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
		defer cancel()
		_, err := r.e.TryLock(ctx, "k")
		return err
	})

	// A Lock waiting in its key's local line behind another of the engine.
	queued := func(t *testing.T, end func(r *rig, cancel context.CancelFunc)) error {
		r := newRig(t, nil)
		if _, err := r.e.TryLock(bg, "k"); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = r.e.Lock(bg, "k") }() // the contender
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := r.e.Lock(ctx, "k")
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		end(r, cancel)
		return <-done
	}
	add("Lock/queued, cut by Close", wClosed, func(t *testing.T) error {
		return queued(t, func(r *rig, _ context.CancelFunc) { r.e.Close() })
	})
	add("Lock/queued, ctx cancelled", wCanceled, func(t *testing.T) error {
		return queued(t, func(_ *rig, cancel context.CancelFunc) { cancel() })
	})
	add("RLock/masters without the read-write ops", wInvalid, func(t *testing.T) error {
		e, err := engine.NewWithTransports([]transport.Transport{bare{memTS(1)[0]}}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		closeAtEnd(t, e)
		_, err = e.RLock(bg, "k")
		return err
	})
	add("LockAll/a key twice", wInvalid, func(t *testing.T) error {
		_, err := newRig(t, nil).e.LockAll(bg, []string{"a", "a"})
		return err
	})
	add("LockAll/fenced", wInvalid, func(t *testing.T) error {
		_, err := newRig(t, nil).e.LockAll(bg, []string{"a", "b"}, api.WithFencing(true))
		return err
	})
	add("RLock/fenced", wInvalid, func(t *testing.T) error {
		_, err := newRig(t, nil).e.RLock(bg, "k", api.WithFencing(true))
		return err
	})
	add("Semaphore/0 permits", wInvalid, func(t *testing.T) error {
		_, err := newRig(t, nil).e.Semaphore(bg, "s", 0)
		return err
	})
	// Close's error is what closing the transports met, as they said it:
	// no sentinel, no *api.Error (api.Locker.Close).
	cs = append(cs, sentinelCase{name: "Close/a transport's Close fails", notAPIError: errCloseFailed, run: func(t *testing.T) error {
		r := newRig(t, func(i int, c *ctl) {
			if i == 0 {
				c.closeErr = errCloseFailed
			}
		})
		return r.e.Close()
	}})

	// Extend.
	held := func(t *testing.T, r *rig, opts ...api.LockOption) api.Lock {
		t.Helper()
		l, err := r.e.TryLock(bg, "k", opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	add("Extend/expired", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		time.Sleep(time.Until(l.Until()) + time.Millisecond)
		return l.Extend(bg)
	})
	add("Extend/released", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		if err := l.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		return l.Extend(bg)
	})
	add("Extend/extensions used up", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		return held(t, r, api.WithMaxExtensions(0)).Extend(bg)
	})
	add("Extend/refused by the masters", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeRefuseExtend)
		return l.Extend(bg)
	})
	add("Extend/after a refused one", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeRefuseExtend)
		_ = l.Extend(bg)
		r.set(modeUp)
		return l.Extend(bg)
	})
	add("Extend/unreachable", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeDownExtend)
		return l.Extend(bg)
	})
	addA("Extend/error replies", wUnreachable, api.ErrErrorReply, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeErrorReply)
		return l.Extend(bg)
	})
	add("Extend/masters slow", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeHang)
		return l.Extend(bg)
	})
	add("Extend/closed", wClosed, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.e.Close()
		return l.Extend(bg)
	})
	add("Extend/cut by Close", wClosed, func(t *testing.T) error {
		r := newRig(t, nil, api.WithMasterTimeout(500*time.Millisecond))
		l := held(t, r)
		r.set(modeHangExtend)
		done := make(chan error, 1)
		go func() { done <- l.Extend(bg) }()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		r.e.Close()
		return <-done
	})
	add("Extend/ctx cancelled", wCanceled, func(t *testing.T) error {
		r := newRig(t, nil)
		return held(t, r).Extend(cancelled)
	})
	add("Extend/deadline while masters are slow", wDeadline, func(t *testing.T) error {
		r := newRig(t, nil, api.WithMasterTimeout(500*time.Millisecond))
		l := held(t, r)
		r.set(modeHangExtend)
		ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
		defer cancel()
		return l.Extend(ctx)
	})
	add("Extend/deadline while another extension is out", wDeadline, func(t *testing.T) error {
		r := newRig(t, nil, api.WithMasterTimeout(500*time.Millisecond))
		l := held(t, r)
		r.set(modeHangExtend)
		go func() { _ = l.Extend(bg) }()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
		defer cancel()
		return l.Extend(ctx)
	})
	// internal is a held lock whose next coordinator round panics.
	internal := func(t *testing.T) api.Lock {
		var armed atomic.Bool
		r := newRig(t, nil, api.WithTracerProvider(boomSpans{armed: &armed}))
		l := held(t, r)
		armed.Store(true)
		return l
	}
	add("Extend/internal error", wInternal, func(t *testing.T) error {
		l := internal(t)
		return l.Extend(bg)
	})
	add("Extend/after an internal error", wNotHeld, func(t *testing.T) error {
		l := internal(t)
		_ = l.Extend(bg)
		return l.Extend(bg)
	})

	// Unlock.
	add("Unlock/twice", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		if err := l.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		return l.Unlock(bg)
	})
	add("Unlock/past Until, keys still there", wExpired, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		time.Sleep(time.Until(l.Until()) + time.Millisecond)
		return l.Unlock(bg)
	})
	add("Unlock/past the TTL, keys gone", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		time.Sleep(l.TTL() + 10*time.Millisecond)
		return l.Unlock(bg)
	})
	add("Unlock/unreachable", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeDown)
		return l.Unlock(bg)
	})
	addA("Unlock/error replies", wUnreachable, api.ErrErrorReply, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeErrorReply)
		return l.Unlock(bg)
	})
	add("Unlock/masters slow", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeHang)
		return l.Unlock(bg)
	})
	add("Unlock/ctx cancelled, masters slow", wCanceled, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeHang)
		return l.Unlock(cancelled)
	})
	add("Unlock/ctx cancelled on the way, masters slow", wCanceled, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeHang)
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(10*time.Millisecond, cancel)
		return l.Unlock(ctx)
	})
	add("Unlock/the transport panics", wUnreachable, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modePanic)
		return l.Unlock(bg)
	})
	add("Unlock/closed", wClosed, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.e.Close()
		return l.Unlock(bg)
	})
	add("Unlock/ctx ended while an extension is out", wCanceled, func(t *testing.T) error {
		r := newRig(t, nil, api.WithMasterTimeout(500*time.Millisecond))
		l := held(t, r)
		r.set(modeHangExtend)
		go func() { _ = l.Extend(bg) }()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		return l.Unlock(cancelled)
	})
	add("Unlock/internal error", wInternal, func(t *testing.T) error {
		l := internal(t)
		return l.Unlock(bg)
	})

	// Lock.Err after each kind of end.
	add("Err/expired", wExpired, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		<-l.Done()
		return l.Err()
	})
	add("Err/expired, unwatched", wExpired, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		time.Sleep(time.Until(l.Until()))
		return l.Err()
	})
	add("Err/released", wReleased, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		_ = l.Unlock(bg)
		return l.Err()
	})
	add("Err/released, Unlock unreachable", wReleased, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeDown)
		_ = l.Unlock(bg)
		return l.Err()
	})
	add("Err/extension refused", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.set(modeRefuseExtend)
		_ = l.Extend(bg)
		return l.Err()
	})
	add("Err/auto-extension refused", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r, api.WithAutoExtend(0.5))
		r.set(modeRefuseExtend)
		<-l.Done()
		return l.Err()
	})
	add("Err/auto-extensions unreachable", wNotHeld, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r, api.WithAutoExtend(0.5))
		r.set(modeDownExtend)
		<-l.Done()
		return l.Err()
	})
	add("Err/auto-extensions used up", wExpired, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r, api.WithAutoExtend(0.5), api.WithMaxExtensions(1))
		<-l.Done()
		return l.Err()
	})
	add("Err/closed", wClosed, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		r.e.Close()
		return l.Err()
	})
	add("Err/closed, watched", wClosed, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		done := l.Done()
		r.e.Close()
		<-done
		return l.Err()
	})
	add("Err/closed during an auto-extension", wClosed, func(t *testing.T) error {
		r := newRig(t, nil, api.WithTTL(2*time.Second), api.WithMasterTimeout(500*time.Millisecond))
		l := held(t, r, api.WithAutoExtend(0.5))
		r.set(modeHangExtend)
		time.Sleep(1200 * time.Millisecond) // the extension due at 1s is out
		synctest.Wait()
		r.e.Close()
		<-l.Done()
		return l.Err()
	})
	add("Err/closed during an Extend", wClosed, func(t *testing.T) error {
		r := newRig(t, nil, api.WithMasterTimeout(500*time.Millisecond))
		l := held(t, r)
		r.set(modeHangExtend)
		done := make(chan error, 1)
		go func() { done <- l.Extend(bg) }()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		r.e.Close()
		<-done
		return l.Err()
	})
	add("Err/expired, then closed", wExpired, func(t *testing.T) error {
		r := newRig(t, nil)
		l := held(t, r)
		time.Sleep(time.Until(l.Until()) + time.Millisecond)
		r.e.Close()
		return l.Err()
	})
	add("Err/internal error in an Extend", wNotHeld, func(t *testing.T) error {
		l := internal(t)
		_ = l.Extend(bg)
		return l.Err()
	})
	return cs
}

// renamed renames a ctl master, for two names of one server.
type renamed struct {
	ctl
	name string
}

func (n *renamed) Name() string { return n.name }

func TestErrorSentinels(t *testing.T) {
	for _, c := range sentinelCases() {
		t.Run(c.name, func(t *testing.T) {
			var err error
			synctest.Test(t, func(t *testing.T) { err = c.run(t) })
			if t.Failed() {
				return
			}
			if err == nil {
				t.Fatalf("no error; want %v", c.want)
			}
			if got := sentinelsOf(err); !slices.Equal(got, c.want) {
				t.Errorf("%v\nmatches %v; want %v", err, got, c.want)
			}
			var ae *api.Error
			if c.notAPIError != nil {
				if errors.As(err, &ae) || !errors.Is(err, c.notAPIError) {
					t.Errorf("%v (%T): want %v as it is, not in an *api.Error", err, err, c.notAPIError)
				}
				return
			}
			if !errors.As(err, &ae) {
				t.Fatalf("%v (%T): errors.As finds no *api.Error", err, err)
			}
			if slices.Contains(c.want, "ErrInternal") {
				var pe *api.PanicError
				if !errors.As(err, &pe) {
					t.Errorf("%v: no *api.PanicError in the chain", err)
				}
			}
			if c.answer != nil && !slices.ContainsFunc(ae.Masters, func(m api.MasterAnswer) bool { return errors.Is(m.Err, c.answer) }) {
				t.Errorf("%v: no master's answer wraps %v: the case missed its cause", err, c.answer)
			}
		})
	}
}
