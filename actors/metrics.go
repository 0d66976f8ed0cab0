package actors

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// Metrics holds the engine's OpenTelemetry instruments (OBSERVABILITY.md
// lists them). The node and coordinator actors and package engine record
// into it through one-line calls; everything about attributes and the
// providers lives here.
//
// Cost is the design constraint: a lock cycle must not allocate for
// telemetry, and without a provider it must cost next to nothing. So every
// attribute set is built once, here, per master and per outcome, and a
// record call passes a prebuilt option slice; and On tells, with one atomic
// load, whether anybody listens, so that the callers skip even reading the
// clock when nobody does.
type Metrics struct {
	global bool // the provider is the global one: on once somebody sets it
	off    bool // a no-op provider: never on

	acqDur   metric.Float64Histogram
	attempts metric.Int64Histogram
	holdDur  metric.Float64Histogram
	lost     metric.Int64Counter
	ext      metric.Int64Counter
	batch    metric.Int64Histogram
	batchDur metric.Float64Histogram
	validity metric.Float64Histogram

	waiters atomic.Int64
	// held counts locks granted and not ended, observed by the callback:
	// an atomic add per grant and end is cheaper than two SDK Adds.
	held atomic.Int64
	// unlocks counts Unlock calls by outcome, observed by the callback as
	// redlock.lock.unlocks: one atomic add per Unlock, next to held's.
	unlocks [numOutcomes]atomic.Int64
	nodes   []nodeMetrics
	// twins is the nodes' record of masters found to be one server
	// (twins.go): such a master does not vote. Nil until the cluster
	// starts.
	twins atomic.Pointer[twins]

	acqAttrs    [numOutcomes][numCalls][2][]metric.RecordOption
	endAttrs    [numEnds][]metric.RecordOption
	lostAttrs   [numEnds][]metric.AddOption
	extAttrs    [numOutcomes][2][]metric.AddOption
	validAttrs  [numCalls][]metric.RecordOption
	unlockAttrs [numOutcomes][]metric.ObserveOption

	reg metric.Registration
}

type nodeMetrics struct {
	queued    atomic.Int64
	in        atomic.Pointer[intake] // its ops count as queued too (intake.go)
	inflight  atomic.Int64
	reachable atomic.Int32 // -1 not known yet, 0 or 1
	// quarantineEnd is when the master votes again (Unix ns), 0 when it
	// never was in quarantine.
	quarantineEnd atomic.Int64
	// unsafe: the master is kept from voting until its configuration
	// changes (api.ErrUnsafeMaster).
	unsafe atomic.Bool
	// read is what the last server check came to: readOK (or none yet),
	// readFailed (no answer), readDenied (the master refused the read,
	// transport.ErrReply: an ACL without INFO). Until a check reads the
	// master's info it does not vote.
	read atomic.Int32

	observe []metric.ObserveOption
	record  []metric.RecordOption
	// ops counts the ops returned, by kind and result, since the engine
	// started: redlock.master.ops is observed from it, since an atomic add
	// per (kind, result) in a batch costs a few instructions where an SDK
	// Add cost about a thousand. opsAttrs are their attribute sets.
	ops      [numKinds][numResults]atomic.Int64
	opsAttrs [numKinds][numResults][]metric.ObserveOption
}

// Outcomes of an acquire (and of an extension or an Unlock, which use a subset).
const (
	OutcomeOK    = iota // "acquired" for an acquire, "ok" for an extension or an Unlock
	OutcomeTaken        // "taken" for an acquire, "not_held" for an extension or an Unlock
	OutcomeUnreachable
	OutcomeCanceled
	OutcomeInvalid
	OutcomeClosed
	// OutcomeInternal: a bug of the engine's ended the call (api.ErrInternal,
	// an actor's panic); the masters may be fine, so not "unreachable".
	OutcomeInternal
	numOutcomes
)

var acquireOutcomes = [numOutcomes]string{"acquired", "taken", "unreachable", "canceled", "invalid", "closed", "internal"}

// extendOutcomes name an extension's outcome and an Unlock's, in the
// metrics and the spans alike: one value of redlock.outcome means one
// thing whichever instrument a dashboard filters.
var extendOutcomes = [numOutcomes]string{"ok", "not_held", "unreachable", "canceled", "invalid", "closed", "internal"}

// Outcome classifies a call's error: its sentinel, as metrics and spans
// report it.
func Outcome(err error) int {
	// The sentinel of the outermost *api.Error decides: its Last (an
	// earlier attempt's error) must not, so errors.Is on the whole chain
	// would misreport a cancelled call whose last attempt was refused.
	// (A type assertion, not errors.As, which would allocate its target.)
	if ae, ok := err.(*api.Error); ok {
		err = ae.Err
	}
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, api.ErrInternal):
		// First: a panic's value may wrap any sentinel (api.PanicError).
		return OutcomeInternal
	case errors.Is(err, api.ErrNotAcquired), errors.Is(err, api.ErrNotHeld):
		return OutcomeTaken
	case errors.Is(err, api.ErrQuorumUnreachable):
		return OutcomeUnreachable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	case errors.Is(err, api.ErrInvalidArgument):
		return OutcomeInvalid
	case errors.Is(err, api.ErrClosed):
		return OutcomeClosed
	}
	return OutcomeUnreachable
}

// AcquireOutcome names an Outcome for an acquire ("acquired", "taken", ...).
func AcquireOutcome(o int) string { return acquireOutcomes[o] }

// ExtendOutcome names an Outcome for an extension or an Unlock ("ok",
// "not_held", ...).
func ExtendOutcome(o int) string { return extendOutcomes[o] }

// The calls that acquire, by redlock.call attribute.
const (
	CallLock = iota
	CallTryLock
	CallLockAll
	CallTryLockAll
	CallRLock
	CallTryRLock
	CallWLock
	CallTryWLock
	CallSemaphore
	CallTrySemaphore
	numCalls
)

var callNames = [numCalls]string{"lock", "trylock", "lockall", "trylockall", "rlock", "tryrlock", "wlock", "trywlock", "semaphore", "trysemaphore"}

// CallIndex maps a call's Op to its index; unknown names count as "lock".
func CallIndex(op string) int {
	for i, n := range callNames {
		if n == op {
			return i
		}
	}
	return CallLock
}

// How a held lock ended (redlock.end of the hold duration; the last three
// are also redlock.cause of lost locks).
const (
	EndReleased = iota
	EndExpired
	EndExtensionFailed
	EndClosed
	numEnds
)

var endNames = [numEnds]string{"released", "expired", "extension_failed", "closed"}

// Results of one op on one master.
const (
	resultOK = iota
	resultRefused
	resultFailed
	resultQuarantined
	numResults
)

var resultNames = [numResults]string{"ok", "refused", "failed", "quarantined"}

// What a master's last server check came to (nodeMetrics.read).
const (
	readOK = iota
	readFailed
	readDenied
)

// numKinds bounds the op kinds with an attribute set of their own; a kind
// past it counts under "unknown".
const numKinds = 16

var defaultMeterProvider = otel.GetMeterProvider()

// MetricsOff reports whether mp is a provider that records nothing: a
// no-op one, or the global default before anybody set one.
func MetricsOff(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case mnoop.MeterProvider, *mnoop.MeterProvider:
		return true
	}
	return mp == defaultMeterProvider
}

// refusedBy is the error of a meter provider that refused what the engine
// asked of it (what), with err: ErrInvalidArgument, as every error of the
// constructors wraps a sentinel, since the provider is the engine's
// setting (WithMeterProvider, or the global one) and a second try with it
// would fail the same way. The provider's error stays in the chain.
func refusedBy(mp metric.MeterProvider, what string, err error) error {
	return fmt.Errorf("%w: the meter provider (%T) failed %s (fix it, or pass a no-op provider to turn metrics off): %w", api.ErrInvalidArgument, mp, what, err)
}

// Scope is the instrumentation scope of the engine's meter and tracer.
const Scope = "github.com/quorumlock/redlock"

// NewMetrics makes the instruments from mp, or from the global provider
// when mp is nil, for the masters names. An mp that is the global default
// (otel.GetMeterProvider() called before anybody set one, passed
// explicitly) is the global provider too: it forwards to the one set
// later, so it is on once somebody sets one, not off for good.
func NewMetrics(mp metric.MeterProvider, names []string) (*Metrics, error) {
	m := &Metrics{global: mp == nil || mp == defaultMeterProvider}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m.off = !m.global && MetricsOff(mp)
	meter := mp.Meter(Scope)
	seconds := metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
	var errs []error
	var err error
	m.acqDur, err = meter.Float64Histogram("redlock.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a Lock, TryLock, LockAll or TryLockAll call took, by outcome"), seconds)
	errs = append(errs, err)
	m.attempts, err = meter.Int64Histogram("redlock.lock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts one acquire call made"), metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100, 1000))
	errs = append(errs, err)
	held, err := meter.Int64ObservableUpDownCounter("redlock.lock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks granted whose handle has not ended yet"))
	errs = append(errs, err)
	m.holdDur, err = meter.Float64Histogram("redlock.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a lock's grant to its end, by how it ended"), seconds)
	errs = append(errs, err)
	m.lost, err = meter.Int64Counter("redlock.lock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks lost before Unlock, by cause"))
	errs = append(errs, err)
	m.ext, err = meter.Int64Counter("redlock.lock.extensions", metric.WithUnit("{extension}"),
		metric.WithDescription("Extensions, by outcome and whether auto-extension made them"))
	errs = append(errs, err)
	unlocks, err := meter.Int64ObservableCounter("redlock.lock.unlocks", metric.WithUnit("{unlock}"),
		metric.WithDescription("Unlock calls, by outcome: released by a majority, not held any more, too few masters answered, ..."))
	errs = append(errs, err)
	m.validity, err = meter.Float64Histogram("redlock.lock.validity", metric.WithUnit("s"),
		metric.WithDescription("Validity a granted lock had left when the acquiring call returned (Until minus then)"), seconds)
	errs = append(errs, err)
	ops, err := meter.Int64ObservableCounter("redlock.master.ops", metric.WithUnit("{op}"),
		metric.WithDescription("Operations a master answered, by kind and result"))
	errs = append(errs, err)
	m.batch, err = meter.Int64Histogram("redlock.master.batch.size", metric.WithUnit("{op}"),
		metric.WithDescription("Operations per batch sent to a master"), metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
	errs = append(errs, err)
	m.batchDur, err = meter.Float64Histogram("redlock.master.batch.duration", metric.WithUnit("s"),
		metric.WithDescription("Round trip of one batch to a master"), seconds)
	errs = append(errs, err)
	queued, err := meter.Int64ObservableUpDownCounter("redlock.master.ops.queued", metric.WithUnit("{op}"),
		metric.WithDescription("Operations waiting for a batch to a master (sampled when batches leave and return)"))
	errs = append(errs, err)
	inflight, err := meter.Int64ObservableUpDownCounter("redlock.master.ops.inflight", metric.WithUnit("{op}"),
		metric.WithDescription("Operations in batches out to a master"))
	errs = append(errs, err)
	reachable, err := meter.Int64ObservableGauge("redlock.master.reachable", metric.WithUnit("{master}"),
		metric.WithDescription("1 when the master answered its last batch or server check, 0 when it did not"))
	errs = append(errs, err)
	quarantined, err := meter.Int64ObservableGauge("redlock.master.quarantined", metric.WithUnit("{master}"),
		metric.WithDescription("1 while the master may not vote: in restart quarantine, unsafe for locks, or one server with another entry; else 0"))
	errs = append(errs, err)
	voting, err := meter.Int64ObservableGauge("redlock.master.voting", metric.WithUnit("{master}"),
		metric.WithDescription("1 while the master counts towards the quorum (it answers, and nothing keeps it from voting), else 0"))
	errs = append(errs, err)
	remaining, err := meter.Float64ObservableGauge("redlock.master.quarantine.remaining", metric.WithUnit("s"),
		metric.WithDescription("Time until the master votes again, 0 when it votes"))
	errs = append(errs, err)
	waiters, err := meter.Int64ObservableUpDownCounter("redlock.lock.waiters", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls waiting in a key's local line behind another call of this engine"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, refusedBy(mp, "making the metric instruments", err)
	}

	for o := range numOutcomes {
		for c := range numCalls {
			for f := range 2 {
				m.acqAttrs[o][c][f] = recordSet(
					attribute.String("redlock.call", callNames[c]),
					attribute.Bool("redlock.fenced", f == 1),
					attribute.String("redlock.outcome", acquireOutcomes[o]))
			}
		}
		for a := range 2 {
			m.extAttrs[o][a] = addSet(attribute.String("redlock.outcome", extendOutcomes[o]), attribute.Bool("redlock.auto", a == 1))
		}
		m.unlockAttrs[o] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("redlock.outcome", extendOutcomes[o])))}
	}
	for c := range numCalls {
		m.validAttrs[c] = recordSet(attribute.String("redlock.call", callNames[c]))
	}
	for e := range numEnds {
		m.endAttrs[e] = recordSet(attribute.String("redlock.end", endNames[e]))
		m.lostAttrs[e] = addSet(attribute.String("redlock.cause", endNames[e]))
	}
	m.nodes = make([]nodeMetrics, len(names))
	for i, name := range names {
		nm := &m.nodes[i]
		nm.reachable.Store(-1)
		master := attribute.String("redlock.master", name)
		nm.observe = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(master))}
		nm.record = recordSet(master)
		for k := range numKinds {
			kind := transport.OpKind(k).String()
			for r := range numResults {
				nm.opsAttrs[k][r] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(
					master, attribute.String("redlock.op", kind), attribute.String("redlock.result", resultNames[r])))}
			}
		}
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		now := time.Now().UnixNano()
		o.ObserveInt64(waiters, m.waiters.Load())
		o.ObserveInt64(held, m.held.Load())
		for u := range m.unlocks {
			if n := m.unlocks[u].Load(); n > 0 {
				o.ObserveInt64(unlocks, n, m.unlockAttrs[u]...)
			}
		}
		for i := range m.nodes {
			nm := &m.nodes[i]
			o.ObserveInt64(queued, nm.queued.Load()+int64(nm.in.Load().len()), nm.observe...)
			o.ObserveInt64(inflight, nm.inflight.Load(), nm.observe...)
			r := nm.reachable.Load()
			left := max(nm.quarantineEnd.Load()-now, 0)
			read := nm.read.Load()
			// A twin is kept out as the others are: it answers, its
			// answers count as quarantined ops, and it does not vote.
			in := int64(0)
			if left > 0 || nm.unsafe.Load() || read == readDenied || m.twin(i) {
				in = 1
			}
			o.ObserveInt64(quarantined, in, nm.observe...)
			if r >= 0 {
				o.ObserveInt64(reachable, int64(r), nm.observe...)
				votes := int64(0)
				if r == 1 && in == 0 && read == readOK {
					votes = 1
				}
				o.ObserveInt64(voting, votes, nm.observe...)
			}
			o.ObserveFloat64(remaining, time.Duration(left).Seconds(), nm.observe...)
			// A (kind, result) that never occurred has no series, as it
			// had none when each batch added to an SDK counter.
			for k := range nm.ops {
				for r := range nm.ops[k] {
					if n := nm.ops[k][r].Load(); n > 0 {
						o.ObserveInt64(ops, n, nm.opsAttrs[k][r]...)
					}
				}
			}
		}
		return nil
	}, queued, inflight, reachable, quarantined, voting, remaining, waiters, held, unlocks, ops)
	if err != nil {
		return nil, refusedBy(mp, "registering the metric callback", err)
	}
	return m, nil
}

func recordSet(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func addSet(kv ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// twin reports whether master i is one server with another entry, and so
// does not vote.
func (m *Metrics) twin(i int) bool {
	tw := m.twins.Load()
	return tw != nil && tw.err(i) != nil
}

// useTwins gives the metrics the nodes' record of twins.
func (m *Metrics) useTwins(tw *twins) {
	if m != nil {
		m.twins.Store(tw)
	}
}

// Close unregisters the callback, so that a closed engine is no longer
// observed (and can be collected).
func (m *Metrics) Close() error {
	if m == nil || m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}

// On reports whether anybody listens: the callers skip their work (reading
// the clock, classifying results) when nobody does.
func (m *Metrics) On() bool {
	if m == nil || m.off {
		return false
	}
	return !m.global || !MetricsOff(otel.GetMeterProvider())
}

// Acquired records an acquire call that took took.
func (m *Metrics) Acquired(call, outcome int, fenced bool, took time.Duration) {
	f := 0
	if fenced {
		f = 1
	}
	m.acqDur.Record(context.Background(), took.Seconds(), m.acqAttrs[outcome][call][f]...)
	if outcome == OutcomeOK {
		m.held.Add(1)
	}
}

// Granted records the validity a lock granted by a call of kind call had
// left when the call returned. Enabled first, as for the per-batch
// histograms: a View that drops the instrument spares the Record.
func (m *Metrics) Granted(call int, validity time.Duration) {
	if ctx := context.Background(); m.validity.Enabled(ctx) {
		m.validity.Record(ctx, validity.Seconds(), m.validAttrs[call]...)
	}
}

// Unlocked counts an Unlock that came to outcome (an Outcome).
func (m *Metrics) Unlocked(outcome int) {
	m.unlocks[outcome].Add(1)
}

// Ended records the end of a lock granted at start: why, and for how long
// it was held. A lock that ends otherwise than by release is lost.
func (m *Metrics) Ended(end int, start time.Time) {
	m.held.Add(-1)
	m.holdDur.Record(context.Background(), time.Since(start).Seconds(), m.endAttrs[end]...)
	if end != EndReleased {
		m.lost.Add(context.Background(), 1, m.lostAttrs[end]...)
	}
}

// Extended records an extension's outcome.
func (m *Metrics) Extended(outcome int, auto bool) {
	a := 0
	if auto {
		a = 1
	}
	m.ext.Add(context.Background(), 1, m.extAttrs[outcome][a]...)
}

// waiting counts a call into (1) or out of (-1) a key's local line.
func (m *Metrics) waiting(d int64) {
	if m != nil {
		m.waiters.Add(d)
	}
}

// finished is the coordinator's hook as call ends with err, before its
// phase becomes phaseDone: it closes the span's last round. (An acquire's
// attempts are recorded by Attempted, on the caller's goroutine.)
func (m *Metrics) finished(call *Call, err error, masters int) {
	if call.phase == phaseQueued {
		m.waiting(-1) // left the line without a turn: cancelled, or closing
	}
	if call.Span != nil {
		switch call.phase {
		case phaseAcquiring, phaseFencing, phaseExtending, phaseReleasing:
			roundEvent(call, err, "", masters)
		}
	}
}

// Attempted records the attempts of call, an acquire that has finished
// (its Done is closed). It runs on the caller's goroutine, not in the
// coordinator's finish: the coordinator's goroutine is new at every
// activation of its mailbox, and the first SDK call on it grew its stack
// (a copy costing more than the Record itself); the callers' goroutines are
// long-lived, and the SDK's instruments take no lock.
func (m *Metrics) Attempted(call *Call) {
	if call.Kind != Acquire || !m.On() || call.attempts == 0 {
		return // a call that left the line (or the engine) unsent made no attempt
	}
	f := 0
	if call.Fenced {
		f = 1
	}
	m.attempts.Record(context.Background(), int64(call.attempts), m.acqAttrs[Outcome(call.Err)][CallIndex(call.Op)][f]...)
}

// attemptFailed adds the span event of an attempt that did not win.
func attemptFailed(call *Call, sentinel error, detail string, masters int) {
	if call.Span != nil {
		roundEvent(call, sentinel, detail, masters)
	}
}

// backedOff adds the span event of the backoff chosen after an attempt.
func backedOff(call *Call, d time.Duration) {
	if call.Span != nil {
		call.Span.AddEvent("backoff", trace.WithAttributes(attribute.Int64("redlock.backoff_ms", d.Milliseconds()),
			attribute.Int("redlock.attempt", call.attempts)))
	}
}

var phaseNames = [...]string{phaseAcquiring: "acquire", phaseFencing: "fence", phaseExtending: "extend", phaseReleasing: "release", phaseDone: ""}

// roundEvent adds one span event for the round of ops call just decided:
// what the masters answered and what came of it.
func roundEvent(call *Call, err error, detail string, masters int) {
	result := "ok"
	if err != nil {
		result = AcquireOutcome(Outcome(err))
	}
	attrs := []attribute.KeyValue{
		attribute.Int("redlock.attempt", call.attempts),
		attribute.Int("redlock.granted", call.granted),
		attribute.Int("redlock.refused", call.refused),
		attribute.Int("redlock.failed", call.failed),
		attribute.Int("redlock.unanswered", masters-call.replied),
		attribute.String("redlock.result", result),
	}
	if detail != "" {
		attrs = append(attrs, attribute.String("redlock.detail", detail))
	}
	call.Span.AddEvent(phaseNames[call.phase], trace.WithAttributes(attrs...))
}

// sending records a batch about to leave for master i, with queued ops left
// behind and inflight batches' ops out (this one included).
func (m *Metrics) sending(i int, b *batch, queued int) {
	if !m.On() {
		return
	}
	nm := &m.nodes[i]
	b.metered = true
	nm.queued.Store(int64(queued))
	nm.inflight.Add(int64(len(b.ops)))
	// The batch's size is recorded when it returns (returned), on the
	// node's long-lived I/O goroutine: here we run on the coordinator's,
	// new at every activation, whose stack the SDK's call would grow.
}

// queued records the ops waiting at master i.
func (m *Metrics) queued(i, queued int) {
	// Stored whether anybody listens or not. The count changes with nearly
	// every op queued (this runs once per op and master, ten times a lock
	// cycle), and asking the global provider whether anybody listens cost
	// more than the store it would spare: about 70 instructions a call
	// against a few (callgrind, BENCHMARKS.md "Round 3 toward 1.0x the
	// ceiling"). Only the gauge's callback reads the count, and only once
	// somebody listens.
	if m == nil {
		return
	}
	if nm := &m.nodes[i]; nm.queued.Load() != int64(queued) {
		nm.queued.Store(int64(queued))
	}
}

// returned records batch b of master i, vetted, before its results go
// back: its round trip, what each op came to, and whether the master
// answered at all.
func (m *Metrics) returned(i int, b *batch, queued int) {
	if !b.metered {
		return // sent while nobody listened
	}
	b.metered = false
	nm := &m.nodes[i]
	nm.inflight.Add(-int64(len(b.ops)))
	nm.queued.Store(int64(queued))
	// The two Records are most of what telemetry costs per batch (about 900
	// instructions each in the SDK, BENCHMARKS.md "otel17"). Enabled is
	// OpenTelemetry's way for an application to turn one instrument off (a
	// View with the Drop aggregation): then the batch pays neither that
	// Record nor, for the round trip, the clock read. It costs a few
	// instructions when the instrument is on.
	ctx := context.Background()
	if m.batchDur.Enabled(ctx) {
		m.batchDur.Record(ctx, time.Since(b.sent).Seconds(), nm.record...)
	}
	if m.batch.Enabled(ctx) {
		m.batch.Record(ctx, int64(len(b.ops)), nm.record...)
	}
	if nm.count(b.ops[:len(b.res)], b.res) {
		nm.reachable.Store(1)
	} else {
		nm.reachable.Store(0)
	}
}

// count adds the ops of a returned batch to nm.ops, one atomic add per kind
// and result that occurs (an add per op would be hundreds in a full batch),
// and reports whether the master answered any of them (every result but
// failed is an answer). It runs per op, so it is kept to a few
// instructions an op. Many batches are uniform, every op of one kind with
// one result (always so at one op a batch): the leading run of the first
// op's pair is counted on its own, and only a batch that holds a second
// pair goes on to tally. (Any split is counted right: the run only saves
// the tally.)
func (nm *nodeMetrics) count(ops []transport.Op, res []transport.Result) (answered bool) {
	if len(res) == 0 {
		return false
	}
	ops = ops[:len(res)]
	p := uint(ops[0].Kind) % numKinds * numResults
	if err := res[0].Err; err != nil {
		p += errResult(err)
	} else if !res[0].OK {
		p += resultRefused
	}
	j := 1
	if res[0].Err == nil {
		k, ok := ops[0].Kind, res[0].OK
		for j < len(res) && ops[j].Kind == k && res[j].Err == nil && res[j].OK == ok {
			j++
		}
	}
	nm.ops[p/numResults][p%numResults].Add(int64(j))
	answered = answeredPairs&(1<<(p%64)) != 0
	if j < len(res) && nm.tally(ops[j:], res[j:]) {
		answered = true
	}
	return answered
}

// errResult is the result of an op that failed with err. The answers that
// vetting kept from voting (quarantine.vet) are quarantined: the master
// answered. They are ErrQuarantined, ErrUnsafeMaster, and for one server
// listed twice ErrInvalidArgument (SameServerError); a transport reports
// none of these for an op (a malformed op is transport.ErrInvalidOp).
func errResult(err error) uint {
	if errors.Is(err, api.ErrQuarantined) || errors.Is(err, api.ErrUnsafeMaster) || errors.Is(err, api.ErrInvalidArgument) {
		return resultQuarantined
	}
	return resultFailed
}

// tally is count for a mixed batch: a local tally by pair (kind*numResults
// + result), with a bit per pair seen, so that only the pairs that
// occurred are added afterwards.
func (nm *nodeMetrics) tally(ops []transport.Op, res []transport.Result) (answered bool) {
	var tally [numKinds * numResults]int32
	var seen uint64 // bit p: pair p occurred
	ops = ops[:len(res)]
	for j := range res {
		p := uint(ops[j].Kind) % numKinds * numResults
		if err := res[j].Err; err != nil {
			p += errResult(err)
		} else if !res[j].OK {
			p += resultRefused
		}
		p %= uint(len(tally))
		tally[p]++
		seen |= 1 << (p % 64)
	}
	answered = seen&answeredPairs != 0
	for seen != 0 {
		p := uint(bits.TrailingZeros64(seen)) % uint(len(tally))
		seen &= seen - 1
		nm.ops[p/numResults][p%numResults].Add(int64(tally[p]))
	}
	return answered
}

// answeredPairs has the seen bit of every pair whose result is an answer.
var answeredPairs = func() (m uint64) {
	for k := range numKinds {
		for r := range numResults {
			if r != resultFailed {
				m |= 1 << (k*numResults + r)
			}
		}
	}
	return m
}()

// The tally's pairs must fit count's seen bits.
var _ [64 - numKinds*numResults]struct{}

// learned records a server check of master i that read its info: when its
// quarantine ends and whether it is unsafe (kept from voting whatever its
// uptime).
func (m *Metrics) learned(i int, votesAt time.Time, unsafe bool) {
	if m == nil {
		return
	}
	nm := &m.nodes[i]
	nm.reachable.Store(1)
	nm.read.Store(readOK)
	nm.quarantineEnd.Store(votesAt.UnixNano())
	nm.unsafe.Store(unsafe)
}

// unread records a server check of master i that failed: denied when the
// master answered, refusing the read (transport.ErrReply), so that it is
// reachable though it does not vote; else it did not answer.
func (m *Metrics) unread(i int, denied bool) {
	if m == nil {
		return
	}
	nm := &m.nodes[i]
	if denied {
		nm.reachable.Store(1)
		nm.read.Store(readDenied)
		return
	}
	nm.reachable.Store(0)
	nm.read.Store(readFailed)
}
