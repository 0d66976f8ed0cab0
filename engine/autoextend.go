package engine

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlock/redlock/api"
)

// autoCtx is the context of a lock's auto-extension: it ends when the lock
// is lost, at Until at the latest (the timer is armed for Until while the
// extension is out), or when the engine closes. It is the lock itself, so
// an extension allocates no context, no deadline timer and no channel: a
// context.WithDeadline cost four allocations, 370 of the 1,220 bytes an
// auto-extension allocated, and a second timer in the runtime's heap beside
// the lock's own, both per extension (BenchmarkAutoExtension). The price is
// the Done channel, made at the first auto-extension if nobody watched the
// lock before: 96 bytes a lock, once.
type autoCtx lock

// Deadline is Until, which does not move while the extension is out.
func (c *autoCtx) Deadline() (time.Time, bool) {
	l := (*lock)(c)
	l.sig.Lock()
	defer l.sig.Unlock()
	return l.until, true
}

// Done is the lock's Done, made by tick before the extension began.
func (c *autoCtx) Done() <-chan struct{} { return c.done }

func (c *autoCtx) Err() error {
	l := (*lock)(c)
	l.sig.Lock()
	defer l.sig.Unlock()
	switch {
	case l.cause == nil:
		return nil
	case errors.Is(l.cause, api.ErrExpired):
		return context.DeadlineExceeded
	default:
		return context.Canceled
	}
}

func (c *autoCtx) Value(any) any { return nil }
