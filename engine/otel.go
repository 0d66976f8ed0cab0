package engine

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlock/redlock/actors"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/check"
)

// obs is the engine's telemetry: the metric instruments (kept in package
// actors, which records most of them) and the tracer. OBSERVABILITY.md
// documents what it produces.
//
// Without providers the global ones are used, as OpenTelemetry's
// convention for libraries says; so are the global defaults passed as
// providers (otel.GetMeterProvider() before anybody set one), which
// forward to the providers set later. A global provider nobody has set, and a
// no-op one, cost a few atomic loads per call and no allocation: the
// global default's tracer would allocate a context for every span it
// does not record, so it is never asked for one.
type obs struct {
	m      *actors.Metrics
	tp     trace.TracerProvider // nil: the global one
	tracer trace.Tracer         // for tp
	keys   bool

	global atomic.Pointer[tracerOf] // the global provider's tracer, cached
}

type tracerOf struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
}

// Span names and start options, per kind of call.
// The acquiring kinds come first, in the order of actors' call indexes
// (actors.CallLock...): lockObserved hands the kind to the metrics as one.
const (
	spanLock = iota
	spanTryLock
	spanLockAll
	spanTryLockAll
	spanRLock
	spanTryRLock
	spanWLock
	spanTryWLock
	spanSemaphore
	spanTrySemaphore
	spanExtend
	spanUnlock
	numSpans
)

var spanNames = [numSpans]string{"redlock.Lock", "redlock.TryLock", "redlock.LockAll", "redlock.TryLockAll",
	"redlock.RLock", "redlock.TryRLock", "redlock.WLock", "redlock.TryWLock", "redlock.Semaphore", "redlock.TrySemaphore",
	"redlock.Extend", "redlock.Unlock"}

var spanStart = func() (s [numSpans][]trace.SpanStartOption) {
	for i, c := range []string{"lock", "trylock", "lockall", "trylockall", "rlock", "tryrlock", "wlock", "trywlock", "semaphore", "trysemaphore", "extend", "unlock"} {
		s[i] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("redlock.call", c))}
	}
	return s
}()

var defaultTracerProvider = otel.GetTracerProvider()

func tracingOff(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tnoop.TracerProvider, *tnoop.TracerProvider:
		return true
	}
	return tp == defaultTracerProvider || tp == trace.NewNoopTracerProvider()
}

func newObs(o api.Options, names []string) (*obs, error) {
	m, err := actors.NewMetrics(o.MeterProvider, names)
	if err != nil {
		return nil, err
	}
	ob := &obs{m: m, tp: o.TracerProvider, keys: o.TraceKeys}
	if ob.tp == defaultTracerProvider {
		// otel.GetTracerProvider() before anybody set one, passed
		// explicitly: it forwards to the provider set later, so it is
		// the global provider, asked at each call, not off for good.
		ob.tp = nil
	}
	if ob.tp != nil && !tracingOff(ob.tp) {
		ob.tracer = ob.tp.Tracer(actors.Scope)
	}
	return ob, nil
}

// tracerNow is the tracer to use for a call now, or nil when nobody
// records spans.
func (ob *obs) tracerNow() trace.Tracer {
	if ob.tp != nil {
		return ob.tracer
	}
	tp := otel.GetTracerProvider()
	if tracingOff(tp) {
		return nil
	}
	if c := ob.global.Load(); c != nil && reflect.ValueOf(tp).Comparable() && c.tp == tp {
		return c.tracer
	}
	c := &tracerOf{tp: tp, tracer: tp.Tracer(actors.Scope)}
	ob.global.Store(c)
	return c.tracer
}

// start begins a span of kind k under ctx's span, or returns nil when no
// span is recorded (so the call pays nothing more for tracing).
func (ob *obs) start(ctx context.Context, k int, key string, keys []string) trace.Span {
	t := ob.tracerNow()
	if t == nil {
		return nil
	}
	_, span := t.Start(ctx, spanNames[k], spanStart[k]...)
	if !span.IsRecording() {
		span.End()
		return nil
	}
	switch {
	case ob.keys && keys != nil:
		span.SetAttributes(attribute.StringSlice("redlock.keys", keys))
	case ob.keys:
		span.SetAttributes(attribute.String("redlock.key", key))
	}
	if keys != nil {
		span.SetAttributes(attribute.Int("redlock.keys.count", len(keys)))
	}
	return span
}

// end closes span with the call's outcome as its status.
func end(span trace.Span, outcome string, err error) {
	span.SetAttributes(attribute.String("redlock.outcome", outcome))
	if err != nil {
		span.SetStatus(codes.Error, outcome)
		span.RecordError(err)
	}
	span.End()
}

// spanCtx carries a call's span from the instrumented entry points down to
// run, which gives it to the actors: a type assertion there is cheaper than
// a context lookup on every call, traced or not.
type spanCtx struct {
	context.Context
	span trace.Span
}

// spanOf is the span of ctx if an entry point of this engine started one.
func spanOf(ctx context.Context) trace.Span {
	if sc, ok := ctx.(*spanCtx); ok {
		return sc.span
	}
	return nil
}

// lockObserved is Lock, TryLock, LockAll, TryLockAll, the read-write locks
// and the semaphores (k says which; permits is a semaphore's) with their
// span and metrics.
func (e *Engine) lockObserved(ctx context.Context, k int, op, key string, keys []string, permits int, opts []api.LockOption, once bool) (api.Lock, error) {
	on := e.obs.m.On()
	var span trace.Span
	if e.obs.tracer != nil || e.obs.tp == nil {
		if key == "" && len(keys) > 0 {
			key = keys[0]
		}
		span = e.obs.start(ctx, k, key, keys)
	}
	if !on && span == nil {
		return e.acquireKind(ctx, k, op, key, keys, permits, opts, once)
	}
	start := time.Now()
	if span != nil {
		ctx = &spanCtx{ctx, span}
	}
	l, err := e.acquireKind(ctx, k, op, key, keys, permits, opts, once)
	outcome := actors.Outcome(err)
	if on {
		fenced := e.opts.Fencing
		switch {
		case l != nil:
			// A granted lock has a token if and only if it is fenced
			// (api.Lock.Token): cheaper than applying the options again,
			// about 700 instructions with one option.
			fenced = l.Token() != 0
		case len(opts) > 0:
			if o, oerr := check.Lock(e.opts, opts); oerr == nil {
				fenced = o.Fencing
			}
		}
		// One clock read ends the wait and starts the hold.
		now := time.Now()
		e.obs.m.Acquired(k, outcome, fenced, now.Sub(start))
		if l != nil {
			// Under sig: an auto-extended lock is on the scheduler
			// already, whose worker may end it (ended reads grantedAt)
			// before this line; a lock lost before it is counted
			// ended here, so that held comes back down.
			ll := l.(*lock)
			ll.sig.Lock()
			ll.grantedAt = now
			validity := ll.until.Sub(now)
			if ll.cause != nil {
				ll.ended(ll.cause)
			}
			ll.sig.Unlock()
			e.obs.m.Granted(k, validity)
		}
	}
	if span != nil {
		if l != nil && l.Token() != 0 {
			span.SetAttributes(attribute.Int64("redlock.token", l.Token()))
		}
		end(span, actors.AcquireOutcome(outcome), err)
	}
	return l, err
}

// acquireKind takes the lock a call of kind k asks for.
func (e *Engine) acquireKind(ctx context.Context, k int, op, key string, keys []string, permits int, opts []api.LockOption, once bool) (api.Lock, error) {
	switch k {
	case spanLockAll, spanTryLockAll:
		return e.acquireAll(ctx, op, keys, opts, once)
	case spanRLock, spanTryRLock:
		return e.acquireMode(ctx, op, key, nil, opts, once, actors.Reader)
	case spanWLock, spanTryWLock:
		return e.acquireMode(ctx, op, key, nil, opts, once, actors.Writer)
	case spanSemaphore, spanTrySemaphore:
		return e.semaphore(ctx, op, key, permits, opts, once)
	}
	return e.acquire(ctx, op, key, nil, opts, once)
}

// extendObserved is extend with its span (for Extend, not for automatic
// extensions, which have no caller to be a child of) and metric.
func (l *lock) extendObserved(ctx context.Context, auto bool) error {
	ob := l.e.obs
	var span trace.Span
	if !auto && (ob.tracer != nil || ob.tp == nil) {
		span = ob.start(ctx, spanExtend, l.key, l.keys)
		if span != nil {
			ctx = &spanCtx{ctx, span}
		}
	}
	err := l.extend(ctx, auto)
	if span == nil && !ob.m.On() {
		return err
	}
	outcome := actors.Outcome(err)
	if ob.m.On() {
		ob.m.Extended(outcome, auto)
	}
	if span != nil {
		end(span, actors.ExtendOutcome(outcome), err)
	}
	return err
}

// unlockObserved is unlock with its span and metric. The metric counts the
// Unlocks of locks granted while metrics were on (grantedAt set), as
// redlock.lock.held counts them: no provider check on the way. grantedAt
// was written before Lock returned the handle, and is not written again.
func (l *lock) unlockObserved(ctx context.Context) error {
	var span trace.Span
	if ob := l.e.obs; ob.tracer != nil || ob.tp == nil {
		span = ob.start(ctx, spanUnlock, l.key, l.keys)
		if span != nil {
			ctx = &spanCtx{ctx, span}
		}
	}
	err := l.unlock(ctx)
	metered := !l.grantedAt.IsZero()
	if span == nil && !metered {
		return err
	}
	outcome := actors.Outcome(err)
	if metered {
		l.e.obs.m.Unlocked(outcome)
	}
	if span != nil {
		end(span, actors.ExtendOutcome(outcome), err)
	}
	return err
}

// ended records the end of l's life with cause; sig held.
func (l *lock) ended(cause error) {
	if l.grantedAt.IsZero() {
		return // granted while nobody listened: not counted as held either
	}
	end := actors.EndExtensionFailed
	if cause == released {
		end = actors.EndReleased
	} else if ae, ok := cause.(*api.Error); ok {
		switch ae.Err {
		case api.ErrClosed:
			end = actors.EndClosed
		case api.ErrExpired:
			end = actors.EndExpired
		}
	}
	l.e.obs.m.Ended(end, l.grantedAt)
}
