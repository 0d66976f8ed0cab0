package redis

import "context"

// writeLock is the pipe's write lock: a mutex whose waiters give up with
// their context. The lock can be held for as long as the master does not
// read: finishWrite (the rest of a batch whose write was cut by its
// deadline) and flush write with no deadline, since the stream must stay
// in step. A batch that waited for a sync.Mutex there outlived its
// context until the master read again, against the transport contract:
// the node's I/O workers stuck on it, an Unlock waited for that master
// without end, and engine.Close waited for the batches in flight.
type writeLock chan struct{}

func newWriteLock() writeLock { return make(writeLock, 1) }

// Lock waits for the lock with no deadline (flush, on its own goroutine).
func (l writeLock) Lock() { l <- struct{}{} }

// lockCtx waits for the lock until ctx ends, and reports ctx's error then.
func (l writeLock) lockCtx(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l writeLock) Unlock() { <-l }
