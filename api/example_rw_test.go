package api_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// Readers share a key; a writer waits for them, and while it waits no new
// reader gets in (writer preference).
func ExampleLocker_rLock() {
	locker, _ := engine.NewMemory(5)
	defer locker.Close()
	ctx := context.Background()

	r1, _ := locker.RLock(ctx, "catalog")
	r2, err := locker.TryRLock(ctx, "catalog")
	fmt.Println("second reader:", err == nil)

	_, err = locker.TryWLock(ctx, "catalog")
	fmt.Println("writer while reading:", errors.Is(err, api.ErrNotAcquired))

	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := locker.TryWLock(ctx, "catalog")
	fmt.Println("writer after the readers:", err == nil)
	_, err = locker.TryRLock(ctx, "catalog")
	fmt.Println("reader while writing:", errors.Is(err, api.ErrNotAcquired))
	_ = w.Unlock(ctx)
	// Output:
	// second reader: true
	// writer while reading: true
	// writer after the readers: true
	// reader while writing: true
}
