package api_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// A semaphore of two permits: two holders at once, the third is refused
// until one lets go. Each permit is a lock on one of the semaphore's slot
// keys, which Key names.
func ExampleLocker_semaphore() {
	locker, err := engine.NewMemory(5)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	a, _ := locker.Semaphore(ctx, "payment-provider", 2)
	b, _ := locker.Semaphore(ctx, "payment-provider", 2)
	fmt.Println("two slots held:", a.Key() != b.Key())

	_, err = locker.TrySemaphore(ctx, "payment-provider", 2)
	fmt.Println("third:", errors.Is(err, api.ErrNotAcquired))

	_ = a.Unlock(ctx)
	c, err := locker.TrySemaphore(ctx, "payment-provider", 2)
	fmt.Println("after an unlock:", err == nil)
	_ = b.Unlock(ctx)
	_ = c.Unlock(ctx)
	// Output:
	// two slots held: true
	// third: true
	// after an unlock: true
}
