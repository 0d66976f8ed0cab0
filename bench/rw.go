package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/quorumlock/redlock/api"
)

// RW adapts an api.Locker's read-write locks to Client: a cycle takes the
// read lock on its key (RLock or TryRLock) and releases it, except every
// writeEvery-th cycle (counted over all lockers), which takes the write lock
// (WLock or TryWLock). writeEvery 0 makes every cycle a read, 1 every cycle
// a write. With the contended workloads readers share their key and writers
// wait for them, so a mix's figures depend on the share of writes.
func RW(l api.Locker, writeEvery int64, opts ...api.LockOption) Client {
	return &rwClient{l: l, every: writeEvery, opts: opts}
}

type rwClient struct {
	l      api.Locker
	every  int64
	cycles atomic.Int64
	opts   []api.LockOption
}

func (c *rwClient) Cycle(ctx context.Context, key string, wait bool) error {
	write := c.every > 0 && c.cycles.Add(1)%c.every == 0
	var (
		lk  api.Lock
		err error
	)
	switch {
	case write && wait:
		lk, err = c.l.WLock(ctx, key, c.opts...)
	case write:
		lk, err = c.l.TryWLock(ctx, key, c.opts...)
	case wait:
		lk, err = c.l.RLock(ctx, key, c.opts...)
	default:
		lk, err = c.l.TryRLock(ctx, key, c.opts...)
	}
	if err != nil {
		if errors.Is(err, api.ErrNotAcquired) {
			return fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		return err
	}
	return lk.Unlock(ctx)
}
