package api

import (
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// MaxMasters is the largest number of masters one engine drives.
const MaxMasters = 64

// Options is what an engine, and each lock it takes, runs with: the
// defaults (DefaultOptions), changed by the Option and LockOption values
// given to the engine and to Lock. It documents each setting and its
// default; engine.Engine.Options reports the engine's. Options are set only
// through the With* functions: each checks its own value, and the engine
// checks how they go together (a TTL too short for its drift allowance, or
// longer than the restart quarantine) when it applies them.
type Options struct {
	// TTL is how long a lock lives on the masters unless extended. Default 10s.
	TTL time.Duration
	// DriftFactor is the share of TTL set aside for clock drift between
	// masters; drift = TTL*DriftFactor + 2ms. Default 0.01.
	DriftFactor float64
	// MasterTimeout bounds how long one master may take to answer one
	// operation before that answer stops counting. It should be small next
	// to TTL. Default 100ms. Engine-wide.
	//
	// A timeout is not yet a failure: a master that answers nothing within
	// it is slow (overload: the attempt is retried without counting
	// against MaxAttempts, an Unlock's release is sent again, and the
	// caller sees latency, or its context's error) until it has been silent,
	// while the engine waited on it, for the lock's TTL; then it is down,
	// and each further timeout on it fails at once, until it answers again.
	// One call waits on slow masters for at most a TTL at a stretch, however
	// the masters answer other calls (SAFETY.md, review15).
	// A master whose connection is refused or reset is down at once. So a
	// master that vanishes without a reset (a partition, a paused process)
	// costs the first call that meets it up to a TTL, and later calls a
	// master timeout each (ARCHITECTURE.md, "A slow master is not a down
	// master").
	MasterTimeout time.Duration
	// Retry shapes how Lock retries a failed attempt.
	Retry Retry
	// MaxExtensions bounds how often one lock can be extended, so that a
	// stuck holder cannot keep a lock forever. Default 1000; 0 forbids
	// extension.
	MaxExtensions int
	// Logger receives the engine's and the actor system's logs. Default: a
	// logger that discards everything. Engine-wide.
	Logger *slog.Logger
	// Coordinators is the number of coordinator actors; keys are sharded
	// over them. Default: 1 where GOMAXPROCS is 1 or 2 when DefaultOptions
	// runs (at the engine's construction), 2 above. On two cores a second
	// coordinator only adds hand-offs between them: one took 7-10 % off the
	// engine's CPU per lock on memory masters and changed nothing on Redis
	// (BENCHMARKS.md, "One coordinator on two cores"). Engine-wide.
	Coordinators int
	// MaxBatch is the most operations a node actor sends to its master in
	// one batch. Default 512. Engine-wide.
	MaxBatch int
	// MaxInFlight is the most batches a node actor has in flight to its
	// master at once. Default 1: measured on five local Redis masters, a
	// second batch in flight cost more CPU per lock than it saved and
	// doubled p99 (BENCHMARKS.md). More can pay on a long round trip.
	// Engine-wide.
	MaxInFlight int
	// Fencing gives each lock a fencing token (Lock.Token; what holds for
	// it is said there) at the price of one more round trip per
	// acquisition: a majority must confirm the token before the lock is
	// granted. Default off; per lock; single-key locks only.
	Fencing bool
	// AutoExtend, when in (0, 1), extends a held lock each time that share of
	// its validity has passed, up to MaxExtensions times, until Unlock; a
	// failed extension ends the lock (Lock.Done). 0 (the default) is off.
	// Per lock. See WithAutoExtend for when each extension is due.
	AutoExtend float64
	// Quarantine keeps a restarted master from voting. Engine-wide.
	Quarantine Quarantine
	// MeterProvider and TracerProvider receive the engine's metrics and
	// spans (OBSERVABILITY.md). Default nil: the global providers, as
	// otel.GetMeterProvider and otel.GetTracerProvider return them at each
	// use. TraceKeys puts lock keys on spans; default off. Engine-wide.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	TraceKeys      bool
}

// Quarantine is the restart quarantine (README, "Guarantees, and their
// limits"; ARCHITECTURE.md, "Crash safety on the same path"): a master that restarted
// without persistence has forgotten its locks, so it must not vote until
// every lock it may have held has expired, that is for the largest TTL in
// use after it started. The engine reads each master's run id and uptime on
// every reconnect and every CheckInterval; a master up for less than Period
// answers ErrQuarantined instead of voting. A transport without
// transport.ServerReporter cannot be quarantined: it is trusted to keep its
// data across restarts (Redis with appendfsync always, say).
type Quarantine struct {
	// Off disables the quarantine: only for masters that never lose data on
	// a restart, or to show the failure it prevents.
	Off bool
	// Period is how long a master sits out after it starts. It must be at
	// least the largest TTL of any lock on these masters, by any client;
	// a lock whose TTL exceeds it is refused. Default: the engine's TTL.
	Period time.Duration
	// CheckInterval is how often each master's run id, uptime and
	// evictions are read besides every reconnect, with the quarantine on or
	// off (WithCheckInterval). Default 1s.
	CheckInterval time.Duration
}

// Retry is the retry budget and backoff shape of Lock. Delays grow from
// InitialInterval by Multiplier up to MaxInterval, each randomized by
// ±RandomizationFactor, and are never shorter than the attempt that failed,
// so that competing clients fall out of step.
type Retry struct {
	// MaxAttempts bounds the attempts of one Lock call; 0 means keep trying
	// until the context ends (as sync.Mutex.Lock and etcd's Mutex.Lock do).
	MaxAttempts         int
	InitialInterval     time.Duration // default 5ms
	MaxInterval         time.Duration // default 250ms
	Multiplier          float64       // default 2
	RandomizationFactor float64       // default 0.5
}

// DefaultOptions returns the defaults described on each field.
func DefaultOptions() Options {
	return Options{
		TTL:           10 * time.Second,
		DriftFactor:   0.01,
		MasterTimeout: 100 * time.Millisecond,
		Retry: Retry{
			InitialInterval:     5 * time.Millisecond,
			MaxInterval:         250 * time.Millisecond,
			Multiplier:          2,
			RandomizationFactor: 0.5,
		},
		MaxExtensions: 1000,
		Coordinators:  defaultCoordinators(),
		MaxBatch:      512,
		MaxInFlight:   1,
		Quarantine:    Quarantine{CheckInterval: time.Second},
	}
}

// defaultCoordinators is Options.Coordinators' default. More than two Ps
// keep the two coordinators measured before; no machine of more cores was
// at hand to measure another number on.
func defaultCoordinators() int {
	if runtime.GOMAXPROCS(0) <= 2 {
		return 1
	}
	return 2
}

// Option configures an engine: engine.New, engine.NewWithTransports and
// engine.NewMemory take it. Every LockOption is an Option too; given to the
// engine, it sets the default for every lock the engine takes. The rest
// (WithMasterTimeout, WithLogger, WithCoordinators, WithBatching,
// WithRestartQuarantine, WithoutRestartQuarantine, WithMeterProvider,
// WithTracerProvider, WithTraceKeys) configure the whole engine and are not
// LockOptions, so passing one to Lock does not compile.
//
// Options are made only by the With* functions of this package: the
// interface has unexported methods, so it cannot be implemented elsewhere.
// A With* function checks its argument when the option is applied; a bad
// value makes the engine constructor (or Lock) fail with an *Error that
// wraps ErrInvalidArgument and says what to fix.
type Option interface {
	engineOption()
}

// LockOption configures one lock: Lock, TryLock, LockAll, TryLockAll, the
// read-write locks (RLock, TryRLock, WLock, TryWLock) and the semaphores
// (Semaphore, TrySemaphore) take it, and it overrides the engine's setting
// for that lock only. The
// LockOptions are WithTTL, WithDriftFactor, WithRetry, WithMaxAttempts,
// WithMaxExtensions, WithFencing and WithAutoExtend.
type LockOption interface {
	Option
	lockOption()
}

// setting is an engine-wide option: a change to Options that checks its own
// argument. Apply is exported for the engine, which is another package; the
// type is not, so neither appears on this package's page.
type setting func(*Options) error

func (setting) engineOption() {}

// Apply applies the option to o.
func (s setting) Apply(o *Options) error { return s(o) }

// lockSetting is a setting that also applies to a single lock.
type lockSetting struct{ setting }

func (lockSetting) lockOption() {}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// maxTTL is the longest TTL the masters' PX takes.
const maxTTL = time.Duration(math.MaxInt32) * time.Millisecond

// WithTTL sets the lock's time to live. It is rounded up to whole
// milliseconds, the resolution of the masters' PX, and must leave at least
// 1ms of validity after the drift allowance (see Options.DriftFactor).
func WithTTL(ttl time.Duration) LockOption {
	return lockSetting{func(o *Options) error {
		switch {
		case ttl <= 0:
			return invalid("ttl %v must be positive", ttl)
		case ttl > maxTTL:
			return invalid("ttl %v is too long (at most %v)", ttl, maxTTL)
		}
		if r := ttl % time.Millisecond; r != 0 {
			ttl += time.Millisecond - r
		}
		o.TTL = ttl
		return nil
	}}
}

// WithDriftFactor sets the clock-drift allowance as a share of TTL, in
// [0, 0.5).
func WithDriftFactor(f float64) LockOption {
	return lockSetting{func(o *Options) error {
		if !(f >= 0 && f < 0.5) {
			return invalid("drift factor %v must be in [0, 0.5)", f)
		}
		o.DriftFactor = f
		return nil
	}}
}

// WithMasterTimeout sets the engine-wide bound on one master's answer; it
// must be positive.
func WithMasterTimeout(d time.Duration) Option {
	return setting(func(o *Options) error {
		if d <= 0 {
			return invalid("master timeout %v must be positive", d)
		}
		o.MasterTimeout = d
		return nil
	})
}

// WithRetry replaces the retry budget and backoff shape. InitialInterval
// must be positive, MaxInterval at least InitialInterval, Multiplier at
// least 1 and RandomizationFactor in [0, 1].
func WithRetry(r Retry) LockOption {
	return lockSetting{func(o *Options) error {
		if err := r.check(); err != nil {
			return err
		}
		o.Retry = r
		return nil
	}}
}

// WithMaxAttempts bounds the attempts of Lock (0: until the context ends).
func WithMaxAttempts(n int) LockOption {
	return lockSetting{func(o *Options) error {
		if err := checkMaxAttempts(n); err != nil {
			return err
		}
		o.Retry.MaxAttempts = n
		return nil
	}}
}

// WithMaxExtensions bounds the extensions of one lock (0 forbids them).
func WithMaxExtensions(n int) LockOption {
	return lockSetting{func(o *Options) error {
		if n < 0 {
			return invalid("max extensions %d must be >= 0", n)
		}
		o.MaxExtensions = n
		return nil
	}}
}

// WithLogger routes the engine's logs (and protoactor's) to l.
func WithLogger(l *slog.Logger) Option {
	return setting(func(o *Options) error {
		o.Logger = l
		return nil
	})
}

// WithCoordinators sets the number of coordinator shards, 1 to 256.
func WithCoordinators(n int) Option {
	return setting(func(o *Options) error {
		if n < 1 || n > 256 {
			return invalid("coordinators %d must be between 1 and 256", n)
		}
		o.Coordinators = n
		return nil
	})
}

// WithBatching sets the node actors' batch size and batches in flight,
// both at least 1.
func WithBatching(maxBatch, maxInFlight int) Option {
	return setting(func(o *Options) error {
		if maxBatch < 1 || maxInFlight < 1 {
			return invalid("batching (%d ops, %d in flight) must both be at least 1", maxBatch, maxInFlight)
		}
		o.MaxBatch, o.MaxInFlight = maxBatch, maxInFlight
		return nil
	})
}

// WithFencing turns fencing tokens on (or off) for the locks it applies to;
// see Lock.Token for what tokens guarantee. Fencing applies to single-key
// locks: LockAll refuses it.
func WithFencing(on bool) LockOption {
	return lockSetting{func(o *Options) error {
		o.Fencing = on
		return nil
	}}
}

// WithAutoExtend extends held locks each time the share frac of their
// validity has passed (0 turns it off). 0.5 is a sound choice. Each
// extension counts toward MaxExtensions, which is the point (a stuck holder
// cannot keep a lock forever): with the defaults (TTL 10s, 1000 extensions)
// an auto-extended lock lives about 83 minutes; raise MaxExtensions for
// longer jobs.
//
// An extension is due once the share frac of the validity granted by the
// acquisition or the last extension has passed, counted from when that
// began, and never sooner than the share frac of the validity left when it
// returned. So a slow extension (one that takes more than frac of the
// validity, possible with frac below 0.5) delays the next one instead of
// starting it at once: extensions never run back to back.
func WithAutoExtend(frac float64) LockOption {
	return lockSetting{func(o *Options) error {
		if !(frac >= 0 && frac < 1) {
			return invalid("auto-extend share %v must be in (0, 1), or 0 for off", frac)
		}
		o.AutoExtend = frac
		return nil
	}}
}

// WithRestartQuarantine sets the quarantine period of restarted masters:
// the largest TTL any client uses on these masters. A lock whose TTL is
// longer is refused.
func WithRestartQuarantine(period time.Duration) Option {
	return setting(func(o *Options) error {
		if period <= 0 {
			return invalid("quarantine period %v must be positive (use WithoutRestartQuarantine to switch it off)", period)
		}
		o.Quarantine.Off, o.Quarantine.Period = false, period
		return nil
	})
}

// WithCheckInterval sets how often each master's run id, uptime, eviction
// policy and evicted_keys are read, besides on every reconnect (Quarantine's
// CheckInterval; default 1s), with the quarantine on or off. A master that
// evicted keys (switched to an evicting policy and back between two reads)
// still votes until the next read finds its count moved, so a shorter
// interval narrows that window, at the cost of one INFO per master per
// interval. It must be at least a millisecond.
func WithCheckInterval(d time.Duration) Option {
	return setting(func(o *Options) error {
		if d < time.Millisecond {
			return invalid("check interval %v must be at least 1ms (the default is 1s)", d)
		}
		o.Quarantine.CheckInterval = d
		return nil
	})
}

// WithoutRestartQuarantine switches the restart quarantine off. A master that
// restarts without its data can then vote at once, and two owners can hold
// one lock; use it only for masters that keep their data across restarts.
func WithoutRestartQuarantine() Option {
	return setting(func(o *Options) error {
		o.Quarantine.Off = true
		return nil
	})
}

func checkMaxAttempts(n int) error {
	if n < 0 {
		return invalid("max attempts %d must be >= 0 (0 means until the context ends)", n)
	}
	return nil
}

// check reports what is wrong with r, or nil.
func (r *Retry) check() error {
	if err := checkMaxAttempts(r.MaxAttempts); err != nil {
		return err
	}
	switch {
	case r.InitialInterval <= 0:
		return invalid("retry: initial interval %v must be positive", r.InitialInterval)
	case r.MaxInterval < r.InitialInterval:
		return invalid("retry: max interval %v must be at least the initial interval %v", r.MaxInterval, r.InitialInterval)
	case !(r.Multiplier >= 1):
		return invalid("retry: multiplier %v must be at least 1", r.Multiplier)
	case !(r.RandomizationFactor >= 0 && r.RandomizationFactor <= 1):
		return invalid("retry: randomization factor %v must be in [0, 1]", r.RandomizationFactor)
	}
	return nil
}
