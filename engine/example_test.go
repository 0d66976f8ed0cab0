package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// New over five independent Redis masters, the reference setup. A lock is
// held once three of them stored it; every error wraps a sentinel of package
// api, and no error leaves a lock to unlock.
func ExampleNew() {
	locker, err := engine.New([]string{
		"redis-a:6379", "redis-b:6379", "redis-c:6379", "redis-d:6379", "redis-e:6379",
	}, api.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err) // a bad address or option: errors.Is(err, api.ErrInvalidArgument)
		return
	}
	defer locker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locker.Lock(ctx, "inventory:sku-42")
	switch {
	case errors.Is(err, api.ErrQuorumUnreachable):
		fmt.Println("too many masters down:", err)
		return
	case err != nil:
		fmt.Println(err) // ctx ended first: errors.Is(err, api.ErrNotAcquired) if the lock was taken
		return
	}
	defer lock.Unlock(ctx)
	// ... work while time.Now().Before(lock.Until()); lock.Extend(ctx) for more
}

// NewMemory is the same engine over in-process masters: it excludes the
// goroutines of one process from each other, and serves tests that need a
// real Locker without Redis.
func ExampleNewMemory() {
	locker, err := engine.NewMemory(5)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.TryLock(ctx, "deploy:prod")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "deploy:prod")
	fmt.Println("second TryLock taken:", errors.Is(err, api.ErrNotAcquired))
	fmt.Println("unlock:", lock.Unlock(ctx))
	// Output:
	// second TryLock taken: true
	// unlock: <nil>
}
