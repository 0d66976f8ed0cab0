package api_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// The whole life of a lock: take it, do the work while it is valid, release
// it. Five in-memory masters stand in for five Redis masters; with real ones,
// build the engine with engine.New and their addresses.
func Example() {
	locker, err := engine.NewMemory(5, api.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.Lock(ctx, "inventory:sku-42")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Act only while the lock is valid.
	if time.Until(lock.Until()) > 0 {
		fmt.Println("updating", lock.Key())
	}
	if err := lock.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: updating inventory:sku-42
}

// TryLock makes one attempt; errors.Is tells a lock held by someone else
// from masters that are down.
func ExampleLocker_tryLock() {
	locker, _ := engine.NewMemory(5)
	defer locker.Close()
	ctx := context.Background()

	first, _ := locker.TryLock(ctx, "deploy:prod")
	_, err := locker.TryLock(ctx, "deploy:prod")
	switch {
	case errors.Is(err, api.ErrNotAcquired):
		fmt.Println("taken: somebody else is deploying")
	case errors.Is(err, api.ErrQuorumUnreachable):
		fmt.Println("too many masters down")
	}
	_ = first.Unlock(ctx)
	// Output: taken: somebody else is deploying
}

// Lock waits (with randomized exponential backoff) until the lock is free or
// the context ends; the error then wraps both the context's error and the
// reason the last attempt failed.
func ExampleLocker_lockWithDeadline() {
	locker, _ := engine.NewMemory(5)
	defer locker.Close()
	holder, _ := locker.TryLock(context.Background(), "report")
	defer holder.Unlock(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := locker.Lock(ctx, "report")
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, api.ErrNotAcquired))
	// Output: true true
}

// Extend keeps a lock for longer than its TTL; it is refused once the
// validity has passed, so a lock that was lost is never silently revived.
func ExampleLock_extend() {
	locker, _ := engine.NewMemory(3, api.WithTTL(time.Second))
	defer locker.Close()
	ctx := context.Background()
	lock, _ := locker.Lock(ctx, "long-job")
	before := lock.Until()
	if err := lock.Extend(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(!lock.Until().Before(before))
	_ = lock.Unlock(ctx)
	// Output: true
}

// Bad input comes back as ErrInvalidArgument with what to fix.
func ExampleErrInvalidArgument() {
	locker, _ := engine.NewMemory(3)
	defer locker.Close()
	_, err := locker.Lock(context.Background(), "k", api.WithTTL(time.Millisecond))
	fmt.Println(errors.Is(err, api.ErrInvalidArgument))
	fmt.Println(err)
	// Output:
	// true
	// redlock: lock "k": invalid argument: ttl 1ms is too short for its clock-drift allowance 2.01ms: use a ttl of at least 4ms
}
