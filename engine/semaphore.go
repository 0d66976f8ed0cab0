package engine

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/actors"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/check"
	"github.com/quorumlock/redlock/transport"
)

// Semaphore takes one of permits permits of the semaphore name, retrying
// until it holds one, the retry budget is spent or ctx ends. Goroutines of
// this engine that want a permit of the same semaphore wait in a local
// line, first come first served, and the one whose turn it is tries again
// at once when a permit is released from this engine.
func (e *Engine) Semaphore(ctx context.Context, name string, permits int, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanSemaphore, "semaphore", name, nil, permits, opts, false)
}

// TrySemaphore makes one attempt to take a permit of the semaphore name:
// it tries every slot before it reports ErrNotAcquired.
func (e *Engine) TrySemaphore(ctx context.Context, name string, permits int, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanTrySemaphore, "trysemaphore", name, nil, permits, opts, true)
}

// checkSemaphore says why name and permits cannot name a semaphore.
func checkSemaphore(name string, permits int) error {
	if permits < 1 || permits > api.MaxPermits {
		return fmt.Errorf("%w: %d permits: a semaphore has 1 to %d", api.ErrInvalidArgument, permits, api.MaxPermits)
	}
	if name == "" {
		return fmt.Errorf("%w: empty semaphore name: give the semaphore a name", api.ErrInvalidArgument)
	}
	if err := check.Key(name); err != nil {
		return fmt.Errorf("semaphore name: %w", err)
	}
	if n := len(api.SemaphoreSlot(name, permits-1)); n > check.MaxKeyLen {
		return fmt.Errorf("%w: semaphore name of %d bytes makes slot keys of up to %d bytes, over the %d-byte key limit: use a name at most %d bytes long",
			api.ErrInvalidArgument, len(name), n, check.MaxKeyLen, len(name)-(n-check.MaxKeyLen))
	}
	return nil
}

func (e *Engine) semaphore(ctx context.Context, op, name string, permits int, opts []api.LockOption, once bool) (api.Lock, error) {
	if err := checkSemaphore(name, permits); err != nil {
		return nil, &api.Error{Op: op, Key: name, Err: err}
	}
	o := e.opts
	var err error
	if len(opts) > 0 {
		o, err = check.Lock(e.opts, opts)
	}
	if err == nil && o.Fencing && e.lacking[transport.Fencing] != nil {
		err = refuse(e.lacking, transport.Fencing)
	}
	if err != nil {
		return nil, &api.Error{Op: op, Key: name, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &api.Error{Op: op, Key: name, Err: err}
	}
	drift := check.Drift(&o)
	l := &lock{e: e, sem: name, ttl: o.TTL, drift: drift, maxExt: o.MaxExtensions, auto: o.AutoExtend}
	call := actors.NewCall(actors.AcquireAny, op, name, l.newValue(), o.TTL, drift)
	call.Sem = name
	call.Permits = permits
	call.Retry = o.Retry
	call.Fenced = o.Fencing
	if once {
		call.Retry.MaxAttempts = 1
	} else {
		call.Queue = true
	}
	if err := e.run(ctx, call); err != nil {
		return nil, err
	}
	l.key, l.value = call.Won()
	l.token = call.Token
	l.granted(call.Start, call.Validity)
	if l.auto > 0 {
		l.sig.Lock()
		l.arm()
		l.sig.Unlock()
	}
	return l, nil
}
