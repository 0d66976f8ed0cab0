package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/redlock/api"
)

// Semaphore adapts an api.Locker's semaphores to Client: a cycle takes one
// of permits permits of the semaphore named by the cycle's key (Semaphore
// or TrySemaphore) and releases it. With the standard workloads, an
// uncontended cycle takes a permit of a fresh semaphore, and in the
// contended one four lockers share each semaphore.
func Semaphore(l api.Locker, permits int, opts ...api.LockOption) Client {
	return semClient{l: l, permits: permits, opts: opts}
}

type semClient struct {
	l       api.Locker
	permits int
	opts    []api.LockOption
}

func (c semClient) Cycle(ctx context.Context, key string, wait bool) error {
	var (
		lk  api.Lock
		err error
	)
	if wait {
		lk, err = c.l.Semaphore(ctx, key, c.permits, c.opts...)
	} else {
		lk, err = c.l.TrySemaphore(ctx, key, c.permits, c.opts...)
	}
	if err != nil {
		if errors.Is(err, api.ErrNotAcquired) {
			return fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		return err
	}
	return lk.Unlock(ctx)
}
