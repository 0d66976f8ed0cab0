package engine

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// The read-write lock (api.Locker's RLock and WLock). A reader and a writer
// are each an ordinary lock handle; only the ops differ (actors.Mode), and
// the masters decide who is admitted (transport.AcquireShared and
// transport.AcquireExclusive; SAFETY.md says why a writer overlaps no
// holder).

const (
	sharedWhat = "a read-write lock (RLock, TryRLock, WLock, TryWLock) needs"
	sharedFix  = "use Lock, which excludes every other holder"
)

// RLock takes a read lock on key, retrying until it is held, the retry
// budget is spent or ctx ends.
func (e *Engine) RLock(ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanRLock, "rlock", key, nil, 0, opts, false)
}

// TryRLock makes one attempt to take a read lock on key.
func (e *Engine) TryRLock(ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanTryRLock, "tryrlock", key, nil, 0, opts, true)
}

// WLock takes the write lock on key, retrying until it is held, the retry
// budget is spent or ctx ends; while readers hold key it holds back new ones.
func (e *Engine) WLock(ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanWLock, "wlock", key, nil, 0, opts, false)
}

// TryWLock makes one attempt to take the write lock on key.
func (e *Engine) TryWLock(ctx context.Context, key string, opts ...api.LockOption) (api.Lock, error) {
	return e.lockObserved(ctx, spanTryWLock, "trywlock", key, nil, 0, opts, true)
}

// checkRW refuses what a read-write lock cannot do: fencing, and masters
// without the read-write ops.
func (e *Engine) checkRW(o *api.Options) error {
	if o.Fencing {
		// Readers hold at once, so no token order can tell a stale reader
		// from a current one; and a fenced writer would need a fenced
		// AcquireExclusive. Lock with WithFencing is a fenced writer
		// (it excludes readers), without the writer preference.
		return fmt.Errorf("%w: fencing tokens order exclusive holders, and readers share the lock: leave fencing off for RLock and WLock (Lock with WithFencing excludes readers too)", api.ErrInvalidArgument)
	}
	return refuse(e.lacking, transport.Shared)
}
