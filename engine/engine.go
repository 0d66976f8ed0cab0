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
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/actors"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/redis"
)

// Engine implements api.Locker over N masters.
type Engine struct {
	opts       api.Options
	cluster    *actors.Cluster
	transports []transport.Transport
	names      []string

	closeOnce sync.Once
	closeErr  error
}

var _ api.Locker = (*Engine)(nil)

// New starts an engine over Redis masters given as "host:port",
// "redis://[user:password@]host:port[/db]" or "rediss://..." (TLS). It does
// not wait for the masters: one that is down costs its vote until it is
// back, and Lock reports ErrQuorumUnreachable while too few are up.
func New(masters []string, opts ...api.Option) (*Engine, error) {
	o, err := options(opts)
	if err != nil {
		return nil, newErr(err)
	}
	if len(masters) == 0 {
		return nil, newErr(fmt.Errorf("%w: no masters: give at least one (five independent ones are the reference setup)", api.ErrInvalidArgument))
	}
	cfgs := make([]redis.Config, len(masters))
	seen := make(map[string]int, len(masters))
	for i, addr := range masters {
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
	for _, cfg := range cfgs {
		t, err := redis.New(cfg)
		if err != nil {
			closeAll(ts)
			return nil, newErr(fmt.Errorf("%w: %w", api.ErrInvalidArgument, err))
		}
		ts = append(ts, t)
	}
	e, err := start(ts, o)
	if err != nil {
		closeAll(ts)
		return nil, err
	}
	return e, nil
}

// NewWithTransports starts an engine over the given transports, one per
// master. The engine owns them from here on and closes them on Close (also
// when NewWithTransports fails).
func NewWithTransports(ts []transport.Transport, opts ...api.Option) (*Engine, error) {
	o, err := options(opts)
	if err == nil {
		err = checkTransports(ts)
	}
	if err != nil {
		closeAll(ts)
		return nil, newErr(err)
	}
	e, err := start(append([]transport.Transport(nil), ts...), o)
	if err != nil {
		closeAll(ts)
	}
	return e, err
}

// NewMemory starts an engine over n fresh in-memory masters: the embedded
// default. The masters live as long as the engine; they protect goroutines of
// this process from each other, nothing more.
func NewMemory(n int, opts ...api.Option) (*Engine, error) {
	if n < 1 || n > api.MaxMasters {
		return nil, newErr(fmt.Errorf("%w: %d in-memory masters: need 1 to %d", api.ErrInvalidArgument, n, api.MaxMasters))
	}
	ts := make([]transport.Transport, n)
	for i := range ts {
		ts[i] = memory.NewNamed(fmt.Sprintf("memory-%d", i+1)).Transport()
	}
	return NewWithTransports(ts, opts...)
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
		if reflect.TypeOf(t).Comparable() {
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

func start(ts []transport.Transport, o api.Options) (*Engine, error) {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = fmt.Sprintf("master %d", i+1)
		if nm, ok := t.(transport.Namer); ok {
			names[i] = nm.Name()
		}
	}
	cl, err := actors.Start(actors.Config{
		Transports:    ts,
		Names:         names,
		MasterTimeout: o.MasterTimeout,
		MaxBatch:      o.MaxBatch,
		MaxInFlight:   o.MaxInFlight,
		Coordinators:  o.Coordinators,
		Logger:        o.Logger,
	})
	if err != nil {
		return nil, newErr(err)
	}
	return &Engine{opts: o, cluster: cl, transports: ts, names: names}, nil
}

func options(opts []api.Option) (api.Options, error) {
	o := api.DefaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, o.Validate()
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
// transports. Calls in progress fail with ErrClosed. It is safe to call more
// than once.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		err := e.cluster.Close()
		for _, t := range e.transports {
			err = errors.Join(err, t.Close())
		}
		e.closeErr = err
	})
	return e.closeErr
}

// Lock takes the lock on key, retrying until it is held, the retry budget is
// spent or ctx ends.
func (e *Engine) Lock(ctx context.Context, key string, opts ...api.Option) (api.Lock, error) {
	return e.acquire(ctx, "lock", key, opts, false)
}

// TryLock makes one attempt to take the lock on key.
func (e *Engine) TryLock(ctx context.Context, key string, opts ...api.Option) (api.Lock, error) {
	return e.acquire(ctx, "trylock", key, opts, true)
}

func (e *Engine) acquire(ctx context.Context, op, key string, opts []api.Option, once bool) (api.Lock, error) {
	if err := api.CheckKey(key); err != nil {
		return nil, &api.Error{Op: op, Key: key, Err: err}
	}
	o, err := e.lockOptions(opts)
	if err != nil {
		return nil, &api.Error{Op: op, Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &api.Error{Op: op, Key: key, Err: err}
	}
	call := actors.NewCall(actors.Acquire, op, key, newValue(), o.TTL, o.Drift())
	call.Retry = o.Retry
	if once {
		call.Retry.MaxAttempts = 1
	}
	if err := e.run(ctx, call); err != nil {
		return nil, err
	}
	return &lock{e: e, key: key, value: call.Value, ttl: o.TTL, drift: o.Drift(), maxExt: o.MaxExtensions,
		until: call.Start.Add(call.Validity)}, nil
}

// lockOptions applies per-call options over the engine's, refusing the ones
// that only make sense for the whole engine.
func (e *Engine) lockOptions(opts []api.Option) (api.Options, error) {
	o := e.opts
	if len(opts) == 0 {
		return o, nil
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	base := e.opts
	switch {
	case o.MasterTimeout != base.MasterTimeout:
		return o, engineOnly("master timeout")
	case o.Logger != base.Logger:
		return o, engineOnly("logger")
	case o.Coordinators != base.Coordinators:
		return o, engineOnly("coordinators")
	case o.MaxBatch != base.MaxBatch || o.MaxInFlight != base.MaxInFlight:
		return o, engineOnly("batching")
	}
	return o, o.Validate()
}

func engineOnly(what string) error {
	return fmt.Errorf("%w: the %s option applies to the whole engine: pass it to engine.New, not to a single lock", api.ErrInvalidArgument, what)
}

// run submits call and waits for it, honouring ctx.
func (e *Engine) run(ctx context.Context, call *actors.Call) error {
	if err := e.cluster.Submit(call); err != nil {
		return &api.Error{Op: call.Op, Key: call.Key, Err: err}
	}
	select {
	case <-call.Done():
	case <-ctx.Done():
		e.cluster.Cancel(call, ctx.Err())
		// The call may have finished before the cancel arrived; its result
		// (a lock the caller now holds, say) is the truth, so wait for it.
		<-call.Done()
	}
	return call.Err
}

// newValue draws a lock value: 128 bits from crypto/rand, so values are
// unique across every client and unguessable.
func newValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// lock is a held lock.
type lock struct {
	e      *Engine
	key    string
	value  string
	ttl    time.Duration
	drift  time.Duration
	maxExt int

	mu       sync.Mutex // serialises Extend and Unlock of one handle
	until    time.Time
	extended int
	released bool
}

func (l *lock) Key() string        { return l.key }
func (l *lock) Value() string      { return l.value }
func (l *lock) TTL() time.Duration { return l.ttl }

func (l *lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *lock) Extend(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	notHeld := func(why string) error {
		return &api.Error{Op: "extend", Key: l.key, Err: api.ErrNotHeld, Detail: why}
	}
	switch {
	case l.released:
		return notHeld("it was released")
	case !time.Now().Before(l.until):
		return notHeld("its validity has passed; take the lock again")
	case l.extended >= l.maxExt:
		return notHeld(fmt.Sprintf("the limit of %d extensions is used up", l.maxExt))
	}
	if err := ctx.Err(); err != nil {
		return &api.Error{Op: "extend", Key: l.key, Err: err}
	}
	l.extended++
	call := actors.NewCall(actors.Extend, "extend", l.key, l.value, l.ttl, l.drift)
	if err := l.e.run(ctx, call); err != nil {
		return err
	}
	if u := call.Start.Add(call.Validity); u.After(l.until) {
		l.until = u
	}
	return nil
}

func (l *lock) Unlock(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return &api.Error{Op: "unlock", Key: l.key, Err: api.ErrNotHeld, Detail: "it was already released"}
	}
	if err := ctx.Err(); err != nil {
		return &api.Error{Op: "unlock", Key: l.key, Err: err}
	}
	call := actors.NewCall(actors.Release, "unlock", l.key, l.value, l.ttl, l.drift)
	err := l.e.run(ctx, call)
	// After "unreachable" or a cancelled context the release may not have
	// landed, so Unlock may be called again; after success or "not held"
	// there is nothing left to release.
	if err == nil || errors.Is(err, api.ErrNotHeld) {
		l.released = true
	}
	return err
}
