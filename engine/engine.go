// Package engine builds the lock engine: it validates options, connects the
// transports, starts the actors and hands out api.Locker.
//
// Three constructors cover the ways to name masters: New with addresses
// (Redis), NewWithTransports with any transports (your own included), and
// NewMemory with n embedded in-memory masters, the default that needs no
// setup.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock/actors"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/check"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/redis"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// Engine implements api.Locker over N masters (api.Locker documents each
// method). Its methods, and those of the locks it returns, are safe for
// concurrent use by many goroutines; one Engine per process and set of
// masters is the intended use.
type Engine struct {
	opts       api.Options
	cluster    *actors.Cluster
	transports []transport.Transport
	checkers   []keyCheckerOf // the transports that check keys (checkKeys)
	names      []string
	// lacking[c] names the masters whose transports do not declare
	// capability c (nil: every master has it). Checked before any op that
	// needs c is sent, so such a master never sees one.
	lacking map[transport.Capabilities][]string

	closeOnce sync.Once
	closeErr  error

	// closed is set by Close (with closedAt). Locks nobody watches are not
	// in sched: they read it when asked, so Close need not know every lock
	// and an unwatched lock costs nothing.
	closed   atomic.Bool
	closedAt time.Time
	obs      *obs
	// sched is the one timer of every watched lock, and bounds the
	// auto-extensions out at once (sched.go, autoslots.go).
	sched sched
}

var _ api.Locker = (*Engine)(nil)

// New starts an engine over Redis masters given as "host:port",
// "redis://[user:password@]host:port[/db]" or "rediss://..." (TLS), or
// Redis Clusters given as "redis+cluster://[user:password@]host:port,host:port"
// ("rediss+cluster://" for TLS; see transport/rediscluster), each cluster
// one master. It asks
// every master for its run id, for at most the master timeout (and at least
// a second), and refuses masters that are one redis-server under two names
// or database numbers. It does not wait for masters beyond that: one that
// is down costs its vote until it is back, and Lock reports
// ErrQuorumUnreachable while too few are up.
func New(masters []string, opts ...api.Option) (*Engine, error) {
	o, err := check.Engine(opts)
	if err != nil {
		return nil, newErr(err)
	}
	if len(masters) == 0 {
		return nil, newErr(fmt.Errorf("%w: no masters: give at least one (five independent ones are the reference setup)", api.ErrInvalidArgument))
	}
	cfgs := make([]redis.Config, len(masters))
	clusters := make([]*rediscluster.Config, len(masters))
	seen := make(map[string]int, len(masters))
	for i, addr := range masters {
		if rediscluster.IsAddr(addr) {
			id, err := clusterConfig(i, addr, o, clusters, seen)
			if err != nil {
				return nil, newErr(err)
			}
			seen[id] = i
			continue
		}
		cfg, err := redis.ParseAddr(addr)
		if err != nil {
			return nil, newErr(fmt.Errorf("%w: master %d: %w", api.ErrInvalidArgument, i+1, err))
		}
		id := strings.ToLower(cfg.Addr)
		if j, dup := seen[id]; dup {
			return nil, newErr(fmt.Errorf("%w: masters %d and %d are both %s: a master counted twice would vote twice; list each once", api.ErrInvalidArgument, j+1, i+1, id))
		}
		seen[id] = i
		cfg.OpTimeout = o.MasterTimeout
		cfgs[i] = cfg
	}
	ts := make([]transport.Transport, 0, len(cfgs))
	for i, cfg := range cfgs {
		var t transport.Transport
		var err error
		if clusters[i] != nil {
			t, err = rediscluster.New(*clusters[i])
		} else {
			t, err = redis.New(cfg)
		}
		if err != nil {
			closeAll(ts)
			return nil, newErr(fmt.Errorf("%w: %w", api.ErrInvalidArgument, err))
		}
		ts = append(ts, t)
	}
	e, err := start(ts, o, true)
	if err != nil {
		closeAll(ts)
		return nil, err
	}
	return e, nil
}

// NewWithTransports starts an engine over the given transports, one per
// master. The engine owns them from here on and closes them on Close (also
// when NewWithTransports fails). Like New, it refuses one transport given
// twice, two transports with one name (transport.Namer), and transports that
// reach one server (equal run ids from transport.ServerReporter), asking them
// for at most the master timeout (at least a second), and no longer than the
// master timeout once a majority has answered; a master that has not
// answered by then is checked at run time, and does not vote while it turns
// out to be one server with another.
//
// A transport needs only Acquire, Release and Extend on single keys. The
// features that need more (WithFencing; LockAll and TryLockAll over several
// keys; the read-write locks RLock, TryRLock, WLock and TryWLock) need every
// master's transport to declare it (transport.Capabler: Fencing, MultiKey,
// Shared): otherwise NewWithTransports refuses an engine-wide WithFencing,
// and the calls refuse a per-lock one, a multi-key lock and a read-write
// lock, with ErrInvalidArgument naming the masters that lack it.
func NewWithTransports(ts []transport.Transport, opts ...api.Option) (*Engine, error) {
	return newWithTransports(ts, true, opts)
}

// newWithTransports is NewWithTransports; vet says whether the nodes read
// their masters' info with the quarantine off (actors.Config.Vet).
func newWithTransports(ts []transport.Transport, vet bool, opts []api.Option) (*Engine, error) {
	o, err := check.Engine(opts)
	if err == nil {
		err = checkTransports(ts)
	}
	if err != nil {
		closeAll(ts)
		return nil, newErr(err)
	}
	e, err := start(append([]transport.Transport(nil), ts...), o, vet)
	if err != nil {
		closeAll(ts)
	}
	return e, err
}

// NewMemory starts an engine over n fresh in-memory masters: the embedded
// default. The masters live as long as the engine; they protect goroutines of
// this process from each other, nothing more.
//
// Its restart quarantine is off (masters born with the engine have no
// past), so it takes locks with any TTL, where New refuses a per-lock TTL
// longer than the quarantine (by default the engine's TTL). Code tested on
// NewMemory with a per-lock WithTTL above the engine's should give New the
// same engine-wide WithTTL, or a WithRestartQuarantine of at least it.
func NewMemory(n int, opts ...api.Option) (*Engine, error) {
	if n < 1 || n > api.MaxMasters {
		return nil, newErr(fmt.Errorf("%w: %d in-memory masters: need 1 to %d", api.ErrInvalidArgument, n, api.MaxMasters))
	}
	ts := make([]transport.Transport, n)
	for i := range ts {
		ts[i] = memory.NewNamed(fmt.Sprintf("memory-%d", i+1)).Transport()
	}
	// Masters born with the engine have no past to forget, so there is
	// nothing to quarantine (an option given here can still turn it on);
	// nor are they replicas, evicting, or one master twice, so there is
	// nothing to vet.
	return newWithTransports(ts, false, append([]api.Option{api.WithoutRestartQuarantine()}, opts...))
}

func checkTransports(ts []transport.Transport) error {
	if len(ts) == 0 {
		return fmt.Errorf("%w: no masters: give at least one transport", api.ErrInvalidArgument)
	}
	if len(ts) > api.MaxMasters {
		return fmt.Errorf("%w: %d masters: at most %d", api.ErrInvalidArgument, len(ts), api.MaxMasters)
	}
	seen := make(map[any]int, len(ts))
	names := make(map[string]int, len(ts))
	for i, t := range ts {
		if t == nil || (reflect.ValueOf(t).Kind() == reflect.Pointer && reflect.ValueOf(t).IsNil()) {
			return fmt.Errorf("%w: master %d is a nil transport", api.ErrInvalidArgument, i+1)
		}
		// The value, not its type: a wrapper struct with an interface field
		// has a comparable type and may still hold an incomparable value.
		if reflect.ValueOf(t).Comparable() {
			if j, dup := seen[t]; dup {
				return fmt.Errorf("%w: masters %d and %d are the same transport: a master counted twice would vote twice", api.ErrInvalidArgument, j+1, i+1)
			}
			seen[t] = i
		}
		if nm, ok := t.(transport.Namer); ok {
			if j, dup := names[nm.Name()]; dup {
				return fmt.Errorf("%w: masters %d and %d are both %q: a master counted twice would vote twice", api.ErrInvalidArgument, j+1, i+1, nm.Name())
			}
			names[nm.Name()] = i
		}
	}
	return nil
}

func start(ts []transport.Transport, o api.Options, vet bool) (*Engine, error) {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = fmt.Sprintf("master %d", i+1)
		if nm, ok := t.(transport.Namer); ok {
			names[i] = nm.Name()
		}
	}
	lacking := make(map[transport.Capabilities][]string)
	for i, t := range ts {
		have := transport.CapabilitiesOf(t)
		for _, c := range []transport.Capabilities{transport.Fencing, transport.MultiKey, transport.Shared} {
			if !have.Has(c) {
				lacking[c] = append(lacking[c], names[i])
			}
		}
	}
	if o.Fencing {
		if err := refuse(lacking, transport.Fencing); err != nil {
			return nil, newErr(err)
		}
	}
	runIDs, err := distinctServers(ts, names, max(o.MasterTimeout, time.Second), o.MasterTimeout)
	if err != nil {
		return nil, newErr(err)
	}
	cfg := actors.Config{
		Transports:    ts,
		Names:         names,
		RunIDs:        runIDs,
		MasterTimeout: o.MasterTimeout,
		MaxBatch:      o.MaxBatch,
		MaxInFlight:   o.MaxInFlight,
		Coordinators:  o.Coordinators,
		Logger:        o.Logger,
	}
	if !o.Quarantine.Off {
		cfg.QuarantinePeriod = o.Quarantine.Period
	}
	cfg.CheckInterval, cfg.Vet = o.Quarantine.CheckInterval, vet
	ob, err := newObs(o, names)
	if err != nil {
		return nil, newErr(err)
	}
	cfg.Metrics = ob.m
	cl, err := actors.Start(cfg)
	if err != nil {
		_ = ob.m.Close()
		return nil, newErr(err)
	}
	e := &Engine{opts: o, cluster: cl, transports: ts, checkers: keyCheckers(ts), names: names, lacking: lacking, obs: ob}
	e.sched.init(autoSlots(o))
	return e, nil
}

// refuse says why a feature that needs capability c cannot be used over
// masters of which lacking[c] lack it, or returns nil when none does. The
// engine refuses such a feature up front rather than send ops that a
// master would answer with errors.ErrUnsupported.
func refuse(lacking map[transport.Capabilities][]string, c transport.Capabilities) error {
	ms := lacking[c]
	if len(ms) == 0 {
		return nil
	}
	what, fix := "fencing tokens (WithFencing) need", "leave fencing off"
	if c == transport.MultiKey {
		what, fix = "a lock on several keys (LockAll, TryLockAll) needs", "lock the keys one by one, always in the same order"
	}
	if c == transport.Shared {
		what, fix = sharedWhat, sharedFix
	}
	return fmt.Errorf("%w: %s the %s ops on every master, but these masters' transports do not declare transport.%s (see transport.Capabler): %s; %s, or give every master a transport that implements them",
		api.ErrInvalidArgument, what, c, capName(c), strings.Join(ms, ", "), fix)
}

func capName(c transport.Capabilities) string {
	if c == transport.MultiKey {
		return "MultiKey"
	}
	if c == transport.Shared {
		return "Shared"
	}
	return "Fencing"
}

// distinctServers refuses masters that are one server process: two names
// for one host, two database numbers of one redis-server, a proxy and the
// server behind it. One process would supply two votes. It asks every
// transport that can tell for its run id, all at once, and waits at most
// timeout, and at most straggle more once a majority of them has answered:
// a master that is down or slow now is checked by the nodes at run time
// instead (see actors/twins.go), and one that hangs must not hold up the
// start of every engine for the whole timeout. It returns the run ids it
// read ("" where none came), which the restart quarantine starts from.
func distinctServers(ts []transport.Transport, names []string, timeout, straggle time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type answer struct {
		i  int
		id string
	}
	answers := make(chan answer, len(ts)) // buffered: a late answer never blocks
	asked := 0
	for i, t := range ts {
		r, ok := t.(transport.ServerReporter)
		if !ok {
			continue
		}
		asked++
		go func() {
			si, err := r.ServerInfo(ctx)
			if err != nil {
				si.RunID = ""
			}
			answers <- answer{i, si.RunID}
		}()
	}
	ids := make([]string, len(ts))
	var late <-chan time.Time
collect:
	for n := range asked {
		if n == asked/2+1 {
			t := time.NewTimer(straggle)
			defer t.Stop()
			late = t.C
		}
		select {
		case a := <-answers:
			ids[a.i] = a.id
		case <-late:
			break collect
		case <-ctx.Done():
			// The stragglers' answers are skipped; their calls end with
			// ctx, which the deferred cancel ends at once.
			break collect
		}
	}
	first := make(map[string]int, len(ts))
	for i, id := range ids {
		if id == "" {
			continue
		}
		if j, dup := first[id]; dup {
			return nil, actors.SameServerError(j, i, names[j], names[i], id)
		}
		first[id] = i
	}
	return ids, nil
}

func closeAll(ts []transport.Transport) {
	for _, t := range ts {
		if t != nil {
			_ = t.Close()
		}
	}
}

func newErr(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	return &api.Error{Op: "new", Err: err}
}

// Masters names the masters, in order.
func (e *Engine) Masters() []string { return append([]string(nil), e.names...) }

// Quorum is how many masters must agree: N/2+1.
func (e *Engine) Quorum() int { return e.cluster.Quorum() }

// Options returns the engine's options after defaults and validation.
func (e *Engine) Options() api.Options { return e.opts }

// Close stops every actor, timer and goroutine of the engine and closes the
// transports. Calls in progress fail with ErrClosed, and every lock of the
// engine, watched or not, is lost: its Done is closed and its Err wraps
// ErrClosed (ErrExpired if its validity had run out first). It returns once
// the engine's goroutines have ended, an auto-extension that was recording
// its outcome through the meter provider included, so the provider may be
// shut down next. It waits for every batch a transport's Do is running to
// return: a Do that ignores its ctx, against the transport contract, holds
// Close up as long as it runs. It is safe to call more than once. Its error
// joins what stopping met (an actor that did not stop, the transports'
// Close, the meter provider unregistering the engine's callback): those
// errors, not an *api.Error, and no sentinel (api.Locker.Close).
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.closedAt = time.Now()
		e.closed.Store(true)
		// From here on arm puts no lock in sched: each watched lock is
		// either returned here or finds the engine closed.
		for _, l := range e.sched.close() {
			l.lose(l.closedErr())
		}
		e.sched.stop()
		err := e.cluster.Close()
		// The cluster's Close has ended the extensions that workers wait
		// on; what a worker or a fire does next (record, lose the lock)
		// ends soon, and no goroutine of the engine outlives Close.
		e.sched.wait()
		err = errors.Join(err, e.obs.m.Close())
		for _, t := range e.transports {
			err = errors.Join(err, t.Close())
		}
		e.closeErr = err
	})
	return e.closeErr
}

// Lock takes the lock on key, retrying until it is held, the retry budget is
// spent or ctx ends. Goroutines of this engine that want the same key wait
// in a local line and contend one at a time, first come first served.
func (e *Engine) Lock(ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanLock, "lock", key, nil, 0, opts, false)
}

// TryLock makes one attempt to take the lock on key.
func (e *Engine) TryLock(ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanTryLock, "trylock", key, nil, 0, opts, true)
}

// LockAll takes every key in keys as one lock, all or nothing.
func (e *Engine) LockAll(ctx context.Context, keys []string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanLockAll, "lockall", "", keys, 0, opts, false)
}

// TryLockAll makes one attempt to take every key in keys as one lock.
func (e *Engine) TryLockAll(ctx context.Context, keys []string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanTryLockAll, "trylockall", "", keys, 0, opts, true)
}

func (e *Engine) acquireAll(ctx context.Context, op string, keys []string, opts []api.LockOption, once bool) (api.Lock, error) {
	if err := check.Keys(keys); err != nil {
		return nil, &api.Error{Op: op, Err: err}
	}
	if len(keys) > 1 {
		if err := refuse(e.lacking, transport.MultiKey); err != nil {
			return nil, &api.Error{Op: op, Key: keys[0], Err: err}
		}
	}
	if len(keys) == 1 {
		return e.acquire(ctx, op, keys[0], nil, opts, once)
	}
	return e.acquire(ctx, op, keys[0], append([]string(nil), keys...), opts, once)
}

func (e *Engine) acquire(ctx context.Context, op, key string, keys []string, opts []api.LockOption, once bool) (api.Lock, error) {
	return e.acquireMode(ctx, op, key, keys, opts, once, actors.Mutex)
}

// acquireMode is acquire of a lock of the given mode (rw.go).
func (e *Engine) acquireMode(ctx context.Context, op, key string, keys []string, opts []api.LockOption, once bool, mode actors.Mode) (api.Lock, error) {
	if err := check.Key(key); err != nil {
		return nil, &api.Error{Op: op, Key: key, Err: err}
	}
	o := e.opts
	var err error
	if len(opts) > 0 {
		o, err = check.Lock(e.opts, opts)
	}
	if err == nil && o.Fencing && keys != nil {
		err = fmt.Errorf("%w: fencing tokens are per key: take a fenced lock on one key, or leave fencing off for a multi-key lock", api.ErrInvalidArgument)
	}
	if err == nil && mode != actors.Mutex {
		err = e.checkRW(&o)
	}
	if err == nil && o.Fencing && e.lacking[transport.Fencing] != nil {
		err = refuse(e.lacking, transport.Fencing)
	}
	if err == nil {
		err = e.checkKeys(key, keys, o.Fencing)
	}
	if err != nil {
		return nil, &api.Error{Op: op, Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &api.Error{Op: op, Key: key, Err: err}
	}
	// The handle is made first so that the value can live inside it: one
	// allocation for both.
	drift := check.Drift(&o)
	l := &lock{e: e, key: key, keys: keys, ttl: o.TTL, drift: drift, maxExt: o.MaxExtensions, auto: o.AutoExtend}
	l.value = l.newValue()
	call := actors.GetCall(actors.Acquire, op, key, l.value, o.TTL, drift)
	defer call.Release() // reused (actors/callpool.go): nothing of it outlives this
	call.Keys = keys
	call.Retry = o.Retry
	call.Fenced = o.Fencing
	call.Mode = mode
	l.mode = mode
	if once {
		call.Retry.MaxAttempts = 1
	} else {
		call.Queue = keys == nil
	}
	if err := e.run(ctx, call); err != nil {
		return nil, err
	}
	l.token = call.Token
	l.granted(call.Start, call.Validity)
	if l.auto > 0 {
		l.sig.Lock()
		l.arm()
		l.sig.Unlock()
	}
	return l, nil
}

// run submits call and waits for it, honouring ctx.
func (e *Engine) run(ctx context.Context, call *actors.Call) error {
	call.Span = spanOf(ctx)
	if ctx.Done() != nil {
		call.MakeDone() // to select on; without, Wait allocates nothing
	}
	if err := e.cluster.Submit(call); err != nil {
		return &api.Error{Op: call.Op, Key: call.Key, Err: err}
	}
	if ctx.Done() == nil {
		// A context that never ends (Background, TODO): a plain receive,
		// where a select of two cases took 4 % of a lock cycle's CPU at
		// 256 lockers on the memory masters.
		call.Wait()
	} else {
		select {
		case <-call.Done():
		case <-ctx.Done():
			e.cluster.Cancel(call, ctx.Err())
			// The call may have finished before the cancel arrived; its
			// result (a lock the caller now holds, say) is the truth, so
			// wait for it.
			<-call.Done()
		}
	}
	e.obs.m.Attempted(call)
	return call.Err
}

// valueLen is the length of a lock value: 16 random bytes in base64.
const valueLen = 22

// newValue draws the lock's value: 128 bits from a cryptographically strong
// generator seeded from crypto/rand (values), so values are unique across
// every client and unguessable. The string's bytes live in the handle
// (written once, here, and never again).
func (l *lock) newValue() string {
	g := values.Get().(*mrand.ChaCha8)
	var b [16]byte
	_, _ = g.Read(b[:]) // never fails
	values.Put(g)
	base64.RawURLEncoding.Encode(l.vbuf[:], b[:])
	return unsafe.String(&l.vbuf[0], valueLen)
}

// values holds the generators of lock values: ChaCha8 (math/rand/v2's
// cryptographically strong generator, which rekeys itself as it goes), each
// seeded with 256 bits of crypto/rand. A pool keeps one per P, so two cores
// drawing values share no state: crypto/rand.Read took 100 ns a value here
// with one goroutine or two drawing at once, a pooled ChaCha8 34 ns with two
// (bench/results/2026-11-28/values).
var values = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	return mrand.NewChaCha8(seed)
}}

// released marks a lock ended by Unlock; Err builds the full error only
// if somebody asks, which keeps Unlock free of that allocation.
var released = errors.New("released")

// lock is a held lock.
type lock struct {
	e      *Engine
	key    string
	keys   []string // nil for a single-key lock
	sem    string   // a semaphore permit's semaphore (key is its slot)
	value  string
	ttl    time.Duration
	drift  time.Duration
	maxExt int
	token  int64
	auto   float64 // auto-extension share of validity, 0 for off
	vbuf   [valueLen]byte
	// mode fills a byte of vbuf's word: 288 bytes, a size class below 320.
	mode actors.Mode // a mutex, or a read-write lock's reader or writer

	// mu is the handle: it serialises Extend, Unlock and auto-extensions
	// of one lock. It is only ever taken with TryLock (take waits for it
	// as long as the caller's ctx allows; an auto-extension skips a handle
	// in use) and let go by letGo, under sig.
	mu       sync.Mutex
	extended int  // written under mu and sig, so either guards a read
	released bool // written under mu and sig, so either guards a read
	// freed is closed when the handle is let go, for the callers waiting
	// for it (take); made by the first of them, nil while nobody waits.
	// Under sig.
	freed chan struct{}

	// sig guards the lifetime state. It is never held across I/O, so the
	// lost-lock signal fires on time even while an extension is out.
	sig      sync.Mutex
	until    time.Time
	extendAt time.Time // next auto-extension
	done     chan struct{}
	cause    error
	hidx     int32 // place in e.sched's heap, plus one (0: not in it); under sched.mu
	watched  bool  // put in e.sched once: Done was asked for, or auto-extension
	inLine   bool  // due and waiting for a slot, or handed to a worker; under sched.lmu
	// retries counts the auto-extensions retried since the last that got
	// through (at most maxExtendRetries); under sig. A byte of the word
	// hidx starts, which leaves the handle at 288 bytes with freed.
	retries uint8

	grantedAt time.Time // when Lock returned it, if metrics were on
}

func (l *lock) Key() string        { return l.key }
func (l *lock) Value() string      { return l.value }
func (l *lock) TTL() time.Duration { return l.ttl }
func (l *lock) Token() int64       { return l.token }

func (l *lock) Keys() []string {
	if l.keys == nil {
		return []string{l.key}
	}
	return append([]string(nil), l.keys...)
}

func (l *lock) Until() time.Time {
	l.sig.Lock()
	defer l.sig.Unlock()
	return l.until
}

// Done is made on first use: a lock nobody watches costs no timer. Every
// call settles the clock first (checkLocked), as Err does: past Until the
// timer may not have run yet (a starved process wakes the timer and its
// caller at once, in no set order), and an open channel handed out then
// would vouch for a lock nobody can vouch for.
func (l *lock) Done() <-chan struct{} {
	l.sig.Lock()
	defer l.sig.Unlock()
	l.checkLocked()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.cause != nil {
			close(l.done)
		} else {
			l.arm()
		}
	}
	return l.done
}

func (l *lock) Err() error {
	l.sig.Lock()
	defer l.sig.Unlock()
	l.checkLocked()
	return l.causeLocked()
}

// checkLocked settles what a lock with no timer cannot be told: the timer
// runs only for watched locks, so the clock and the engine are the truth.
// Past Until nobody can vouch for the lock, and once the engine closed
// nobody will, whether or not Done was ever called. sig held.
func (l *lock) checkLocked() {
	if l.cause != nil {
		return
	}
	if l.e.closed.Load() && l.e.closedAt.Before(l.until) {
		l.loseLocked(l.closedErr())
	} else if time.Until(l.until) <= 0 { // the monotonic clock alone: until carries a reading
		l.loseLocked(l.expiredErr())
	}
}

// expiredErr is the cause of a lock whose validity ran out; sig held. An
// auto-extended one that used up its extensions says so, since that is
// the setting to change (a long job meets the default limit).
func (l *lock) expiredErr() error {
	err := &api.Error{Op: "lock", Key: l.key, Err: api.ErrExpired}
	if l.auto > 0 && l.extended >= l.maxExt {
		err.Detail = fmt.Sprintf("its auto-extensions stopped at the limit of %d (WithMaxExtensions)", l.maxExt)
	}
	return err
}

func (l *lock) closedErr() error {
	return &api.Error{Op: "lock", Key: l.key, Err: api.ErrClosed}
}

// causeLocked is the cause with the released marker spelled out; sig held.
func (l *lock) causeLocked() error {
	if l.cause == released {
		l.cause = &api.Error{Op: "lock", Key: l.key, Err: api.ErrReleased}
	}
	return l.cause
}

// granted records a (re)grant that began at start and is valid for v.
//
// The next auto-extension is due once the share auto of v has passed since
// start, and never sooner than the share auto of what is left of the
// validity now, when the grant is known: an extension slower than auto*v
// would otherwise make the next one due before it returned, and extensions
// would run back to back until MaxExtensions is used up.
func (l *lock) granted(start time.Time, v time.Duration) {
	l.retries = 0
	if u := start.Add(v); u.After(l.until) {
		l.until = u
	}
	if l.auto > 0 {
		at := start.Add(time.Duration(float64(v) * l.auto))
		now := time.Now()
		if rest := now.Add(time.Duration(float64(l.until.Sub(now)) * l.auto)); rest.After(at) {
			at = rest
		}
		l.extendAt = at
	}
}

// arm sets the timer for the next event: the validity deadline or, with
// auto-extension, the next extension. sig must be held.
func (l *lock) arm() {
	if l.cause != nil {
		return
	}
	next := l.until
	if l.auto > 0 && l.extended < l.maxExt && l.extendAt.Before(next) {
		next = l.extendAt
	}
	// Refused once Close has collected the watched locks: a lock is
	// either ended by Close or never scheduled.
	if !l.e.sched.put(l, next) {
		l.loseLocked(l.closedErr())
	}
}

// tick runs on the scheduler's goroutine (sched.fire) when l's event is
// due. It never waits for the handle's mutex: while an auto-extension is
// due, l stays scheduled for the validity deadline, so Done closes at Until
// whatever Extend or Unlock is doing meanwhile.
func (l *lock) tick() {
	l.sig.Lock()
	if l.cause != nil {
		l.sig.Unlock()
		return
	}
	now := time.Now()
	if !now.Before(l.until) {
		l.loseLocked(l.expiredErr())
		l.sig.Unlock()
		return
	}
	if l.auto == 0 || l.extended >= l.maxExt || now.Before(l.extendAt) {
		l.arm()
		l.sig.Unlock()
		return
	}
	if l.done == nil {
		l.done = make(chan struct{}) // autoExtend's context ends with it
	}
	// In line for a slot, and scheduled for Until meanwhile; a worker runs
	// extendDue (autoslots.go).
	if !l.e.sched.extendDue(l) {
		l.loseLocked(l.closedErr())
	}
	l.sig.Unlock()
}

// stillDue reports whether the auto-extension that tick found due still
// is, now that extendDue has mu: while it waited in line for a slot, the
// user's Extend may have extended the lock (and used up MaxExtensions),
// and a second extension then would be spent for nothing, or fail and end
// a lock that is valid until Until.
func (l *lock) stillDue() bool {
	l.sig.Lock()
	defer l.sig.Unlock()
	return l.cause == nil && l.extended < l.maxExt && !time.Now().Before(l.extendAt)
}

// autoExtend makes one auto-extension, with mu held and l.done made, and
// lets go of mu.
func (l *lock) autoExtend() {
	// Extend never outlives the validity: past it the lock may be someone
	// else's, and extending would be a lie. The timer is armed for Until,
	// where it closes done, which ends autoCtx.
	err := l.extendObserved((*autoCtx)(l), true)
	l.letGo()
	if err != nil {
		if errors.Is(err, api.ErrQuorumUnreachable) && l.retryExtension() {
			return
		}
		l.lose(l.lostOnExtension("auto-extension failed", err))
		return
	}
	l.rearm()
}

// lostOnExtension is the cause of a lock given up because an extension
// failed with err (why says whose): ErrNotHeld, and nothing else, as
// api.Lock.Err promises. err is told in Detail, its masters' answers with
// it, but not wrapped: its own sentinel would be a second one in Err's
// chain, and in that of every later Extend's error (which carries the
// cause), where it misleads. ErrQuorumUnreachable tells an Extend's caller
// that the lock stays held and Extend may be called again, and ErrInternal
// that an operation's outcome is unknown; the lock, given up, is neither.
func (l *lock) lostOnExtension(why string, err error) error {
	return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Detail: why + ": " + strings.TrimPrefix(err.Error(), "redlock: ")}
}

// maxExtendRetries bounds the auto-extensions retried in a row (see
// retryExtension).
const maxExtendRetries = 2

// retryExtension schedules another auto-extension after one that failed as
// unreachable, and reports whether it did. Too few answers in time is not
// "no longer held": on a client starved of CPU, healthy masters' answers
// are read after the master timeout (issue 13), and the lock stays valid
// until Until whatever the masters did. So the extension is tried again,
// after the share auto (at least half) of what is left of the validity, as
// granted spaces extensions, while that leaves time, and at most
// maxExtendRetries times in a row; Done still closes at Until if none gets
// through. A refusal by a majority (ErrNotHeld) still ends the lock.
func (l *lock) retryExtension() bool {
	l.sig.Lock()
	defer l.sig.Unlock()
	if l.cause != nil || !l.watched {
		return true // ended meanwhile (Unlock, Close, expiry): nothing to do
	}
	// A few retries ride out a late read; under sustained overload more
	// would only add load (a round of n held locks would be tried
	// log2(validity/1ms) times each), so after maxExtendRetries the lock
	// is given up as before.
	if l.retries >= maxExtendRetries {
		return false
	}
	l.retries++
	// Half what is left at least, so that a small share does not retry a
	// down majority hundreds of times before Until.
	now := time.Now()
	at := now.Add(time.Duration(float64(l.until.Sub(now)) * max(l.auto, 0.5)))
	if !at.Before(l.until) || l.until.Sub(at) < time.Millisecond {
		return false
	}
	l.extendAt = at
	l.arm()
	return true
}

// rearm points a watched lock's timer at its next event after an
// extension, whatever came of it.
func (l *lock) rearm() {
	l.sig.Lock()
	if l.watched {
		l.arm()
	}
	l.sig.Unlock()
}

// lose ends the lock's life with cause: Done closes, timers stop.
func (l *lock) lose(cause error) {
	l.sig.Lock()
	defer l.sig.Unlock()
	l.loseLocked(cause)
}

// loseLocked is lose with sig held.
func (l *lock) loseLocked(cause error) {
	if l.cause != nil {
		return
	}
	l.cause = cause
	l.ended(cause)
	if l.done != nil {
		close(l.done)
	}
	if l.watched {
		l.e.sched.remove(l)
	}
}

func (l *lock) Extend(ctx context.Context) error {
	err := l.extendHeld(ctx)
	// After mu is free: a tick that found it taken has left the timer at
	// the deadline and counts on this to bring the next extension back.
	l.rearm()
	return err
}

// extendHeld is Extend under mu, let go of even if it panics (a nil ctx, a
// TracerProvider's panic): a caller that recovers must still Unlock. When
// ctx ends while another has the handle (an auto-extension or Extend out,
// or an Unlock), it returns ctx's error and the lock stays as it was.
func (l *lock) extendHeld(ctx context.Context) error {
	if !l.take(ctx) {
		// A lock that ended before (an Unlock whose ctx ended while the
		// handle was out gave it up, the engine closed, Until passed) is
		// not "as it was": say so, as extend does with the handle.
		l.checkLocked()
		err := l.endedErr(l.causeLocked())
		l.sig.Unlock()
		if err != nil {
			return err
		}
		return &api.Error{Op: "extend", Key: l.key, Err: ctx.Err(), Detail: "the context ended while another extension or an Unlock of the lock was out; the lock is as it was"}
	}
	defer l.letGo()
	return l.extendObserved(ctx, false)
}

// endedErr is Extend's error for a lock that has ended (cause, released),
// or nil while it is held. Read with mu or sig held (released).
func (l *lock) endedErr(cause error) error {
	switch {
	case l.released:
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Detail: "it was released"}
	case errors.Is(cause, api.ErrExpired): // checkLocked found Until passed
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Detail: "its validity has passed; take the lock again"}
	case errors.Is(cause, api.ErrClosed): // Close ended it: what Locker.Close says of calls after it
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrClosed, Detail: "the engine closed, which ended the lock"}
	case cause != nil:
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Last: cause, Detail: "the lock was already lost"}
	}
	return nil
}

// take takes the handle (mu) for Extend or Unlock, waiting for it at most
// until ctx ends, and reports whether it did. When ctx ended first it
// returns false with sig held and the handle still another's: the holder
// cannot let go (letGo takes sig) while the caller settles what its ended
// wait means, and the caller lets go of sig.
func (l *lock) take(ctx context.Context) bool {
	if l.mu.TryLock() {
		return true
	}
	for {
		ended := ctx.Err() != nil // outside sig: ctx is the caller's, sig a leaf
		l.sig.Lock()
		// Under sig, so that the handle's holder, which lets go under sig,
		// lets go after this and finds freed made.
		if l.mu.TryLock() {
			l.sig.Unlock()
			return true
		}
		if ended {
			return false
		}
		if l.freed == nil {
			l.freed = make(chan struct{})
		}
		freed := l.freed
		l.sig.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
		}
	}
}

// letGo lets go of the handle, and wakes whoever waits for it (take).
func (l *lock) letGo() {
	l.sig.Lock()
	l.mu.Unlock()
	if l.freed != nil {
		close(l.freed)
		l.freed = nil
	}
	l.sig.Unlock()
}

// extend is Extend with mu held; auto says it is an auto-extension, whose
// failure for too few answers in time the timer retries (retryExtension).
func (l *lock) extend(ctx context.Context, auto bool) error {
	notHeld := func(why string) error {
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Detail: why}
	}
	l.sig.Lock()
	l.checkLocked() // a lock past Until ends as expired (Err, metrics)
	cause, until := l.causeLocked(), l.until
	l.sig.Unlock()
	if err := l.endedErr(cause); err != nil {
		return err
	}
	if l.extended >= l.maxExt {
		return notHeld(fmt.Sprintf("the limit of %d extensions is used up", l.maxExt))
	}
	if err := ctx.Err(); err != nil {
		return &api.Error{Op: "extend", Key: l.key, Err: err}
	}
	l.sig.Lock() // the timer reads extended under sig
	l.extended++
	l.sig.Unlock()
	call := actors.GetCall(actors.Extend, "extend", l.key, l.value, l.ttl, l.drift)
	defer call.Release()
	call.Keys = l.keys
	call.Mode = l.mode
	call.Until = until
	if err := l.e.run(ctx, call); err != nil {
		// A majority refused: it no longer holds the lock. An extension
		// that only lacked answers in time leaves the lock as it was,
		// valid until Until (the keys live at least that long), so
		// Extend may be called again, and an auto-extension is retried
		// by the timer (retryExtension). An extension the engine's own
		// bug lost (ErrInternal, coord19) gives the lock up: nothing
		// vouches for what the engine did with it.
		if errors.Is(err, api.ErrNotHeld) || errors.Is(err, api.ErrInternal) {
			l.lose(l.lostOnExtension("an extension failed", err))
		}
		return err
	}
	l.sig.Lock()
	defer l.sig.Unlock()
	if l.cause != nil {
		// Lost while the extension was out: the signal has fired and
		// stays fired.
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Last: l.causeLocked(), Detail: "the lock was lost while extending"}
	}
	l.granted(call.Start, call.Validity)
	return nil
}

// Unlock has no re-arm after it, as Extend has: every Unlock gives the lock
// up (or finds it given up already), so an auto-extension it made skip has
// nothing left to extend.
func (l *lock) Unlock(ctx context.Context) error {
	return l.unlockObserved(ctx)
}

func (l *lock) unlock(ctx context.Context) error {
	// asked is when this Unlock began to wait for the handle, if another
	// had it: an extension out may hold it past Until, where the timer
	// ends the lock as expired, though it was valid when Unlock was called.
	var asked time.Time
	if !l.mu.TryLock() {
		asked = time.Now()
		if !l.take(ctx) {
			return l.unlockOut(ctx)
		}
	}
	defer l.letGo()
	if l.released {
		return &api.Error{Op: "unlock", Key: l.key, Err: api.ErrNotHeld, Detail: "it was already released"}
	}
	caller := ctx
	bounded := ctx.Err() != nil // ctx becomes Unlock's own wait (not compared: a ctx's type may be incomparable)
	if bounded {
		// A deferred Unlock whose work's context ended (a request gone,
		// a job past its deadline) still means "let go": returning at
		// once would leave the lock held, auto-extended on. So the
		// ended context bounds only the wait: the release goes out,
		// and Unlock waits for it at most the master timeout; masters
		// that have not answered by then get it again in the
		// background (actors/unlockleft.go), as for any Unlock whose
		// context ends on the way.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), l.e.opts.MasterTimeout)
		defer cancel()
	}
	// From here on the engine cannot vouch for the lock.
	l.sig.Lock()
	ended, until := l.giveUpLocked()
	l.sig.Unlock()
	err := l.release(ctx, until)
	if bounded {
		err = callersCtxErr(err, caller.Err())
	}
	// After "unreachable" or a cancelled context the release may not have
	// landed, so Unlock may be called again; after success or "not held"
	// there is nothing left to release.
	if err == nil || errors.Is(err, api.ErrNotHeld) {
		l.sig.Lock()
		l.released = true
		l.sig.Unlock()
	}
	if err == nil && errors.Is(ended, api.ErrExpired) && (asked.IsZero() || !asked.Before(until)) {
		// Its validity ran out before this Unlock, though a majority
		// still had its keys (Until comes a drift allowance before
		// their TTL) and released them. The caller's work may have
		// outrun the lock, so Unlock does not say nil: ErrExpired, as
		// its doc says. A lock that ran out while Unlock waited for the
		// handle (asked before Until) did not: the work ended in time.
		return &api.Error{Op: "unlock", Key: l.key, Err: api.ErrExpired,
			Detail: "its validity ran out before Unlock; its keys were released"}
	}
	return err
}

// callersCtxErr is err, the release's error under the wait that Unlock
// gave itself for a ctx that had ended, with cerr, that ctx's error, in
// place of the wait's own DeadlineExceeded: the caller's ctx is what ended
// (it may have been cancelled), and an Unlock whose ctx ends on the way
// reports ctx's error too.
func callersCtxErr(err, cerr error) error {
	if ae, ok := err.(*api.Error); ok && ae.Err == context.DeadlineExceeded {
		c := *ae
		c.Err = cerr
		return &c
	}
	return err
}

// unlockOut is Unlock when ctx ended while another had the handle: an
// auto-extension or the user's Extend out (for up to the master timeout),
// or another Unlock. sig held (take), let go of here. The lock is given up
// all the same (Done closes, which also ends an auto-extension out: its
// context is the lock, autoCtx), and the release goes out at once, with
// the ended ctx: Unlock does not wait for it, and every master that has
// not answered it by the time the coordinator has the cancel is sent it
// again in the background (actors/unlockleft.go) until it answers or the
// key must have expired, or once more as the engine closes.
//
// No key is left by the extension still out: an extension only moves the
// expiry of a key that holds the lock's value and never re-creates one
// (transport.Extend, ExtendShared), so on each master it lands before the
// release, which then deletes the key, or after it, and finds nothing; and
// a node sends a key's op only after the key's batch in flight returned,
// so the release follows the extension on each master's connection.
// released stays unset, as after any Unlock whose ctx ended on the way: a
// later Unlock sends the release again.
func (l *lock) unlockOut(ctx context.Context) error {
	if l.released {
		l.sig.Unlock()
		return &api.Error{Op: "unlock", Key: l.key, Err: api.ErrNotHeld, Detail: "it was already released"}
	}
	_, until := l.giveUpLocked()
	l.sig.Unlock()
	return l.release(ctx, until)
}

// giveUpLocked ends the lock for an Unlock, sig held: one past Until (or
// whose engine closed) ends so, not released, as its Err and the metrics
// say. It returns why the lock had ended before, nil if it was held, and
// its Until, which the release carries.
func (l *lock) giveUpLocked() (ended error, until time.Time) {
	l.checkLocked()
	ended = l.cause
	l.loseLocked(released)
	return ended, l.until
}

// release sends the lock's release and waits for it as ctx allows (an
// ended ctx hands it to the background cleanup at once: run).
func (l *lock) release(ctx context.Context, until time.Time) error {
	call := actors.GetCall(actors.Release, "unlock", l.key, l.value, l.ttl, l.drift)
	defer call.Release()
	call.Keys = l.keys
	call.Mode = l.mode
	call.Sem = l.sem
	call.Until = until
	return l.e.run(ctx, call)
}
