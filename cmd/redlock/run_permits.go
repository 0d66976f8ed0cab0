//go:build unix

package main

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/check"
)

// validatePermits checks --permits, and --key as a semaphore's name: its
// slot keys must be valid keys too.
func (o *runOptions) validatePermits() error {
	switch {
	case o.Permits < 0 || o.Permits > api.MaxPermits:
		return fmt.Errorf("--permits %d: want 1 to %d (or 0, the default: a lock, not a semaphore)", o.Permits, api.MaxPermits)
	case o.Permits == 0:
		return nil
	}
	if n := len(api.SemaphoreSlot(o.Key, o.Permits-1)); n > check.MaxKeyLen {
		return fmt.Errorf("--key of %d bytes makes slot keys of up to %d bytes with --permits %d, over the %d-byte key limit: use a key at most %d bytes long",
			len(o.Key), n, o.Permits, check.MaxKeyLen, len(o.Key)-(n-check.MaxKeyLen))
	}
	return nil
}

// take takes the lock, or with --permits a permit of the semaphore: one
// attempt with --wait 0, else waiting until ctx ends.
func (o *runOptions) take(ctx context.Context, eng *engine.Engine) (api.Lock, error) {
	switch {
	case o.Permits > 0 && o.Wait == 0:
		return eng.TrySemaphore(ctx, o.Key, o.Permits)
	case o.Permits > 0:
		return eng.Semaphore(ctx, o.Key, o.Permits)
	case o.Wait == 0:
		return eng.TryLock(ctx, o.Key)
	}
	return eng.Lock(ctx, o.Key)
}
