// Package api is what users of redlock program against: the Locker that
// takes locks, the Lock handle, options and errors. The engine package
// builds a Locker; this package depends on nothing beyond the standard
// library but the OpenTelemetry API's two interface packages (metric and
// trace, for WithMeterProvider and WithTracerProvider: no SDK, no exporter),
// so code that only takes or passes locks imports little else.
//
// # Options
//
// Option values configure an engine (engine.New, NewWithTransports,
// NewMemory); LockOption values configure one lock (Lock, TryLock, LockAll,
// TryLockAll, Semaphore, TrySemaphore) over the engine's settings. A per-lock option, such as
// WithTTL, is both: given to the engine it sets the default for its locks.
// An engine-wide option, such as WithMasterTimeout, is only an Option, so
// passing it to Lock does not compile. Options documents every setting and
// its default.
//
// # Guarantees
//
// A Lock is held by one owner at a time for as long as its validity lasts
// (Until), under the Redlock assumptions: a majority (N/2+1) of independent
// masters stored the lock's unique value, the masters' clocks run at about
// the same rate, and nobody steps a master's wall clock. Validity is
// measured from the start of the attempt that won, on the local monotonic
// clock, minus a drift allowance (TTL*DriftFactor + 2ms). Past Until the
// lock may belong to someone else; code that must not run then should check
// Until (or extend) before acting.
//
// # Errors
//
// Every error wraps one of ErrNotAcquired ("taken": somebody else holds
// it), ErrQuorumUnreachable ("masters down": too few masters answered, or
// they answered with error replies, which the message then says),
// ErrNotHeld, ErrInvalidArgument or ErrClosed, or the context's own error
// (or, should the engine hit a bug of its own, ErrInternal: outcome unknown);
// the *Error it comes in says what each master answered. Close's error is
// the one exception: what closing the transports met (Locker.Close).
//
// # The Lock handle is an interface
//
// Lock (like Locker) is an interface, not a concrete type, on purpose. The
// handle's state (its timers, the calls it sends to the masters) lives in
// package engine, and this package must stay free of the engine and its
// dependencies: a concrete type here could only wrap an interface of the
// same methods, so the contract would be the same and a layer longer. An
// interface also lets a Locker be wrapped (metrics, tracing) by code that
// returns wrapped Locks. The price is that a method added to Lock breaks
// types that implement it outside this module. So: a test fake should
// embed api.Lock (or api.Locker) and override only what it needs, as
// methods added later are then promoted from the embedded value; and
// engine.NewMemory is a real, in-process Locker for tests that need no
// fake at all.
package api

import (
	"context"
	"time"
)

// Locker takes locks. It is safe for concurrent use.
type Locker interface {
	// Lock takes the lock on key, retrying with randomized exponential
	// backoff until it is held, the retry budget (Options.Retry) is spent,
	// or ctx ends. Options given here override the engine's for this lock.
	// A key is 1 to 1024 bytes and must not start with "redlock-fence:",
	// the prefix of the fencing counters.
	Lock(ctx context.Context, key string, opts ...LockOption) (Lock, error)
	// TryLock makes exactly one attempt that the masters decide: it
	// returns ErrNotAcquired when a majority refused, without waiting for
	// the holder. An attempt spoiled by overload (an op that waited past
	// its time in this process's queues, or masters slow to answer, see
	// Options.MasterTimeout) is not one the masters decided, and is tried
	// again after a backoff while ctx allows, for at most about a TTL of
	// overload at a stretch, after which it fails with
	// ErrQuorumUnreachable: give ctx a deadline to bound TryLock's wait.
	TryLock(ctx context.Context, key string, opts ...LockOption) (Lock, error)
	// LockAll takes several keys (1 to 64, each listed once) as one lock,
	// all or nothing: on each master either every key is set or none is.
	// Released and extended together. It waits like Lock; fencing does not
	// apply to multi-key locks (WithFencing(true) is refused).
	LockAll(ctx context.Context, keys []string, opts ...LockOption) (Lock, error)
	// TryLockAll is LockAll with exactly one attempt.
	TryLockAll(ctx context.Context, keys []string, opts ...LockOption) (Lock, error)
	// RLock takes a read (shared) lock on key: any number of readers hold
	// it at once, and no writer while one does. A reader is admitted only
	// when no writer holds the key and no writer waits for the readers in
	// place (writer preference: a writer refused by live readers turns new
	// readers away until it got in, gave up, or its TTL passed; README,
	// "Read-write locks"). A plain Lock on the key is a writer too: it
	// excludes readers and they exclude it, but only WLock makes readers
	// wait for it. Until, Done, Err, Extend, auto-extension and Unlock work
	// as for Lock; fencing does not apply (WithFencing(true) is refused,
	// also as the engine's default: pass WithFencing(false) then; readers
	// hold at once, so a token cannot order them). It waits like
	// Lock. Not reentrant: a goroutine that holds a read lock and asks again
	// gets a second, independent hold, and one that asks for the write lock
	// waits for itself until its budget ends.
	RLock(ctx context.Context, key string, opts ...LockOption) (Lock, error)
	// TryRLock is RLock with exactly one attempt.
	TryRLock(ctx context.Context, key string, opts ...LockOption) (Lock, error)
	// WLock takes the write (exclusive) lock on key: granted when no writer
	// and no live reader holds it, as Lock is, and while live readers keep
	// it out it holds back new readers until it gets in, so a stream of
	// readers cannot starve it. The lock it returns is a mutex on key in
	// every other respect; fencing is refused (use Lock with WithFencing
	// for a fenced writer, without the writer preference).
	WLock(ctx context.Context, key string, opts ...LockOption) (Lock, error)
	// TryWLock is WLock with exactly one attempt; when refused it clears the
	// mark that held back new readers.
	TryWLock(ctx context.Context, key string, opts ...LockOption) (Lock, error)
	// Semaphore takes one of permits permits of the semaphore name (1 to
	// MaxPermits permits; see SemaphoreSlot for the name's limits), waiting
	// like Lock: at most permits holders hold one at a time. The Lock it
	// returns is the permit: an ordinary lock on one of the semaphore's
	// slot keys (Key names the slot), with Until, Done, Extend,
	// auto-extension and fencing tokens (per slot) as for Lock. Every
	// caller must give one name the same permits. Not reentrant: a holder
	// that asks again takes a second permit (or waits for one).
	Semaphore(ctx context.Context, name string, permits int, opts ...LockOption) (Lock, error)
	// TrySemaphore is Semaphore with exactly one attempt; it fails with
	// ErrNotAcquired only when every slot was found taken.
	TrySemaphore(ctx context.Context, name string, permits int, opts ...LockOption) (Lock, error)
	// Close stops the engine: operations in progress fail with ErrClosed,
	// and every actor, timer, goroutine and connection is stopped. Locks
	// still held stay on the masters until they expire. Its error, nil
	// when all went well, is what stopping met (a transport's Close that
	// failed, say), joined with errors.Join: those errors as they are, not
	// an *Error, and no sentinel of this package. The engine is closed
	// whatever it returns.
	Close() error
}

// Lock is a held lock. Its methods are safe for concurrent use.
type Lock interface {
	// Key is the lock's name (the first key of a multi-key lock).
	Key() string
	// Keys lists every key of the lock.
	Keys() []string
	// Value is the lock's unique value on the masters (also its owner id).
	Value() string
	// Until is the validity deadline: the lock is exclusive before it. It
	// carries a monotonic clock reading, so time.Until(l.Until()) is safe.
	Until() time.Time
	// TTL is the lock's time to live on the masters.
	TTL() time.Duration
	// Token is the lock's fencing token (WithFencing), 0 without fencing.
	// For one key, a lock granted after another gets a strictly larger
	// token, as long as mutual exclusion holds (Until is honoured, clocks
	// drift within the allowance) and the masters that confirmed a token
	// keep their fencing counters (persistence: the restart quarantine
	// keeps a restarted master's votes out, not its lost counters; the
	// proof is in SAFETY.md). Tokens are not consecutive, and attempts
	// that were not granted use up numbers too. Pass the token to the
	// resource you protect so that it can refuse a holder whose token is
	// older than one it saw: the token, not Until, is what stops a holder
	// that paused past its validity.
	Token() int64
	// Done is closed the moment the engine can no longer vouch for the
	// lock: its validity ran out, an extension failed, it was unlocked, or
	// the engine closed. Err then says which. Work that must not outlive
	// the lock should stop when Done is closed.
	//
	// A call to Done or Err after Until finds the lock ended. A channel
	// already in hand is closed by the engine's timer, a goroutine like any
	// other: a process starved of CPU (or stopped) can wake past Until and
	// run the holder before the timer, which then sees the channel open for
	// a moment. Before an action that must not outlive the lock, ask Err
	// (or compare time.Now with Until) rather than a channel read earlier;
	// what a paused process does next only a fencing token can stop.
	Done() <-chan struct{}
	// Err is nil while Done is open; afterwards it wraps exactly one of
	// ErrNotHeld (as ErrExpired, ErrReleased, or, when an extension
	// failed, as an *Error with Op "extend") and ErrClosed. A failed
	// extension's own error is told in that *Error's message (Detail), not
	// wrapped: errors.Is finds no ErrQuorumUnreachable or ErrInternal in
	// Err, since the lock is given up whatever kept it from being extended.
	Err() error
	// Extend sets the lock's expiry to TTL from now on every master that
	// still holds it, and moves Until. It fails with ErrNotHeld once Until
	// has passed, when a majority no longer holds the lock, or when
	// MaxExtensions is used up; it never re-creates a lock that expired.
	// After the engine closed it fails with ErrClosed.
	// When too few masters answered in time (ErrQuorumUnreachable) or ctx
	// ended, the lock stays as it was, held until Until, and Extend may be
	// called again. ctx also bounds Extend's wait for an extension of the
	// lock already out (an auto-extension waits for slow masters up to the
	// master timeout) or an Unlock in progress.
	Extend(ctx context.Context) error
	// Unlock releases the lock on every master. It returns nil when a
	// majority released it, ErrNotHeld when it had already expired or been
	// released, and ErrQuorumUnreachable when too few masters answered. A
	// lock whose Until had passed when Unlock was called is ErrExpired (an
	// ErrNotHeld) even when its keys were still on the masters and are now
	// released: the work it guarded may have outrun it. One that ran out
	// while Unlock waited for an extension out is not.
	// A master whose release timed out while it was slow, not down, is
	// sent it again in the background until it answers or the key must
	// have expired, so its key may outlive the call by a few master
	// timeouts; a master down (refusing connections, or silent for a TTL)
	// keeps it until its TTL.
	//
	// Unlock gives the lock up whatever ctx (Done closes, auto-extension
	// stops): ctx bounds only its wait. So `defer lock.Unlock(ctx)` with
	// the ctx the work ran under releases the lock even when that ctx has
	// ended: the release is sent, and Unlock waits for the answers at most
	// the master timeout; masters that have not answered when the wait
	// ends are sent it again in the background, as above, and Unlock then
	// returns ctx's error (not that of its own wait). While an
	// extension of the lock is out (an auto-extension or Extend, which
	// wait for slow masters up to the master timeout) Unlock waits for it
	// only as long as ctx allows: when ctx ends first, the lock is given up
	// all the same, the release is sent at once and left to the background
	// as above, and Unlock returns ctx's error.
	Unlock(ctx context.Context) error
}
