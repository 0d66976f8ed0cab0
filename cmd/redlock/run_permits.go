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

// take takes the lock, or with --permits a permit of the semaphore, or with
// --shared a read lock: one attempt with --wait 0, else waiting until ctx
// ends. A run without --shared or --permits takes the plain lock, as
// before: it excludes the readers of its key and they exclude it, but it
// does not hold new readers back, so a steady stream of --shared runs can
// delay it (the library's WLock has that writer preference; a run keeps
// Lock so that its attempts, fencing and compatibility with earlier runs
// stay what they were).
func (o *runOptions) take(ctx context.Context, eng *engine.Engine) (api.Lock, error) {
	switch {
	case o.Permits > 0 && o.Wait == 0:
		return eng.TrySemaphore(ctx, o.Key, o.Permits)
	case o.Permits > 0:
		return eng.Semaphore(ctx, o.Key, o.Permits)
	case o.Shared && o.Wait == 0:
		return eng.TryRLock(ctx, o.Key)
	case o.Shared:
		return eng.RLock(ctx, o.Key)
	case o.Wait == 0:
		return eng.TryLock(ctx, o.Key)
	}
	return eng.Lock(ctx, o.Key)
}
