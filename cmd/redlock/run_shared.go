package main

import (
	"context"
	"errors"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

func (o *runOptions) validateShared() error {
	if o.Shared && o.Fencing {
		return errors.New("--shared with --fencing: fencing tokens order exclusive holders, and readers share the lock; drop one of them")
	}
	return nil
}

// take takes the lock, or with --shared a read lock: one attempt with
// --wait 0, else waiting until ctx ends. A run without --shared takes the
// plain lock, as before: it excludes the readers of its key and they
// exclude it, but it does not hold new readers back, so a steady stream of
// --shared runs can delay it (the library's WLock has that writer
// preference; a run keeps Lock so that its attempts, fencing and
// compatibility with earlier runs stay what they were).
// (At merge with the semaphore branch, one take covers --permits too.)
func (o *runOptions) take(ctx context.Context, eng *engine.Engine) (api.Lock, error) {
	switch {
	case o.Shared && o.Wait == 0:
		return eng.TryRLock(ctx, o.Key)
	case o.Shared:
		return eng.RLock(ctx, o.Key)
	case o.Wait == 0:
		return eng.TryLock(ctx, o.Key)
	}
	return eng.Lock(ctx, o.Key)
}
