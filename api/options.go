package api

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// MaxKeyLen is the longest key the engine accepts, in bytes. Redis itself
// allows far longer keys, but a lock key is a name, and a bound keeps a bad
// key (a whole request body, say) from being copied to every master.
const MaxKeyLen = 1024

// MaxMasters is the largest number of masters one engine drives.
const MaxMasters = 64

// Options configures an engine, and per call the lock it takes. Start from
// DefaultOptions; the With* functions change one field each and fail on a
// bad value.
type Options struct {
	// TTL is how long a lock lives on the masters unless extended. Default 10s.
	TTL time.Duration
	// DriftFactor is the share of TTL set aside for clock drift between
	// masters; drift = TTL*DriftFactor + 2ms. Default 0.01.
	DriftFactor float64
	// MasterTimeout bounds how long one master may take to answer one
	// operation; a dead or paused master costs at most this much. It should
	// be small next to TTL. Default 100ms. Engine-wide.
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
	// over them. Default: 2. Engine-wide.
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
}

// Quarantine is the restart quarantine (design §3): a master that restarted
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
	// CheckInterval is how often each master's run id and uptime are read
	// besides every reconnect. Default 1s.
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
		Coordinators:  2,
		MaxBatch:      512,
		MaxInFlight:   1,
		Quarantine:    Quarantine{CheckInterval: time.Second},
	}
}

// Option changes Options and may fail; a failure is an ErrInvalidArgument.
type Option func(*Options) error

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// WithTTL sets the lock's time to live. It is rounded up to whole
// milliseconds, the resolution of the masters' PX.
func WithTTL(ttl time.Duration) Option {
	return func(o *Options) error {
		if ttl <= 0 {
			return invalid("ttl %v must be positive", ttl)
		}
		o.TTL = ttl
		return nil
	}
}

// WithDriftFactor sets the clock-drift allowance as a share of TTL.
func WithDriftFactor(f float64) Option {
	return func(o *Options) error {
		if !(f >= 0 && f < 0.5) {
			return invalid("drift factor %v must be in [0, 0.5)", f)
		}
		o.DriftFactor = f
		return nil
	}
}

// WithMasterTimeout sets the engine-wide bound on one master's answer.
func WithMasterTimeout(d time.Duration) Option {
	return func(o *Options) error {
		if d <= 0 {
			return invalid("master timeout %v must be positive", d)
		}
		o.MasterTimeout = d
		return nil
	}
}

// WithRetry replaces the retry budget and backoff shape.
func WithRetry(r Retry) Option {
	return func(o *Options) error {
		o.Retry = r
		return o.Retry.validate()
	}
}

// WithMaxAttempts bounds the attempts of Lock (0: until the context ends).
func WithMaxAttempts(n int) Option {
	return func(o *Options) error {
		if n < 0 {
			return invalid("max attempts %d must be >= 0 (0 means until the context ends)", n)
		}
		o.Retry.MaxAttempts = n
		return nil
	}
}

// WithMaxExtensions bounds the extensions of one lock.
func WithMaxExtensions(n int) Option {
	return func(o *Options) error {
		if n < 0 {
			return invalid("max extensions %d must be >= 0", n)
		}
		o.MaxExtensions = n
		return nil
	}
}

// WithLogger routes the engine's logs (and protoactor's) to l.
func WithLogger(l *slog.Logger) Option {
	return func(o *Options) error {
		o.Logger = l
		return nil
	}
}

// WithCoordinators sets the number of coordinator shards.
func WithCoordinators(n int) Option {
	return func(o *Options) error {
		if n < 1 || n > 256 {
			return invalid("coordinators %d must be between 1 and 256", n)
		}
		o.Coordinators = n
		return nil
	}
}

// WithBatching sets the node actors' batch size and batches in flight.
func WithBatching(maxBatch, maxInFlight int) Option {
	return func(o *Options) error {
		if maxBatch < 1 || maxInFlight < 1 {
			return invalid("batching (%d ops, %d in flight) must both be at least 1", maxBatch, maxInFlight)
		}
		o.MaxBatch, o.MaxInFlight = maxBatch, maxInFlight
		return nil
	}
}

// WithFencing turns fencing tokens on (or off) for the locks it applies to;
// see Lock.Token for what tokens guarantee.
func WithFencing(on bool) Option {
	return func(o *Options) error {
		o.Fencing = on
		return nil
	}
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
func WithAutoExtend(frac float64) Option {
	return func(o *Options) error {
		if !(frac >= 0 && frac < 1) {
			return invalid("auto-extend share %v must be in (0, 1), or 0 for off", frac)
		}
		o.AutoExtend = frac
		return nil
	}
}

// WithRestartQuarantine sets the quarantine period of restarted masters:
// the largest TTL any client uses on these masters.
func WithRestartQuarantine(period time.Duration) Option {
	return func(o *Options) error {
		if period <= 0 {
			return invalid("quarantine period %v must be positive (use WithoutRestartQuarantine to switch it off)", period)
		}
		o.Quarantine.Off, o.Quarantine.Period = false, period
		return nil
	}
}

// WithoutRestartQuarantine switches the restart quarantine off. A master that
// restarts without its data can then vote at once, and two owners can hold
// one lock; use it only for masters that keep their data across restarts.
func WithoutRestartQuarantine() Option {
	return func(o *Options) error {
		o.Quarantine.Off = true
		return nil
	}
}

// Drift is the allowance subtracted from every validity: TTL*DriftFactor + 2ms.
func (o *Options) Drift() time.Duration {
	return time.Duration(float64(o.TTL)*o.DriftFactor) + 2*time.Millisecond
}

// Validate checks the whole set, including what single options cannot see
// (a TTL too short for its own drift), and rounds TTL up to milliseconds.
func (o *Options) Validate() error {
	if o.TTL <= 0 {
		return invalid("ttl %v must be positive", o.TTL)
	}
	if r := o.TTL % time.Millisecond; r != 0 {
		o.TTL += time.Millisecond - r
	}
	if o.TTL > time.Duration(math.MaxInt32)*time.Millisecond {
		return invalid("ttl %v is too long (at most %v)", o.TTL, time.Duration(math.MaxInt32)*time.Millisecond)
	}
	if !(o.DriftFactor >= 0 && o.DriftFactor < 0.5) {
		return invalid("drift factor %v must be in [0, 0.5)", o.DriftFactor)
	}
	if o.TTL-o.Drift() < time.Millisecond {
		return invalid("ttl %v is too short for its clock-drift allowance %v: use a ttl of at least %v",
			o.TTL, o.Drift(), minTTL(o.DriftFactor))
	}
	if o.MasterTimeout <= 0 {
		return invalid("master timeout %v must be positive", o.MasterTimeout)
	}
	if o.MaxExtensions < 0 {
		return invalid("max extensions %d must be >= 0", o.MaxExtensions)
	}
	if o.Coordinators < 1 || o.Coordinators > 256 {
		return invalid("coordinators %d must be between 1 and 256", o.Coordinators)
	}
	if o.MaxBatch < 1 || o.MaxInFlight < 1 {
		return invalid("batching (%d ops, %d in flight) must both be at least 1", o.MaxBatch, o.MaxInFlight)
	}
	if !(o.AutoExtend >= 0 && o.AutoExtend < 1) {
		return invalid("auto-extend share %v must be in (0, 1), or 0 for off", o.AutoExtend)
	}
	if q := o.Quarantine; !q.Off {
		if q.Period < 0 || q.CheckInterval <= 0 {
			return invalid("quarantine period %v and check interval %v must be positive", q.Period, q.CheckInterval)
		}
		if q.Period > 0 && o.TTL > q.Period {
			return invalid("ttl %v is longer than the restart quarantine %v: a restarted master could vote while it still owed this lock; raise the quarantine with WithRestartQuarantine", o.TTL, q.Period)
		}
	}
	return o.Retry.validate()
}

// minTTL is the smallest TTL whose validity can be at least 1ms.
func minTTL(f float64) time.Duration {
	return time.Duration(math.Ceil(3/(1-f))) * time.Millisecond
}

func (r *Retry) validate() error {
	switch {
	case r.MaxAttempts < 0:
		return invalid("retry: max attempts %d must be >= 0", r.MaxAttempts)
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

// FencePrefix starts the names of fencing counters on the masters; lock
// keys must not start with it.
const FencePrefix = "redlock-fence:"

// MaxKeys is the most keys one multi-key lock may have.
const MaxKeys = 64

// CheckKey reports why key cannot be a lock key, or nil.
func CheckKey(key string) error {
	if key == "" {
		return invalid("empty key: give the lock a name")
	}
	if len(key) > MaxKeyLen {
		return invalid("key of %d bytes is longer than the %d-byte limit: use a shorter name (a hash of a long one)", len(key), MaxKeyLen)
	}
	if strings.HasPrefix(key, FencePrefix) {
		return invalid("key %q starts with %q, which names fencing counters: choose another name", key, FencePrefix)
	}
	return nil
}

// CheckKeys reports why keys cannot be the keys of one multi-key lock.
func CheckKeys(keys []string) error {
	if len(keys) == 0 {
		return invalid("no keys: give at least one")
	}
	if len(keys) > MaxKeys {
		return invalid("%d keys: at most %d in one lock", len(keys), MaxKeys)
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return err
		}
		if _, dup := seen[k]; dup {
			return invalid("key %q is listed twice: list each key once", k)
		}
		seen[k] = struct{}{}
	}
	return nil
}
