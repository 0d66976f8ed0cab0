package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
)

// Unlock's contract: nil when a majority released the lock, ErrNotHeld when
// it had already expired. A lock that expired on every master before its
// Unlock, with three of five masters slow during the release, was reported
// released: the two healthy masters refuse (the key is gone), the three slow
// ones' releases are sent again (resendSlow), and their refusals counted as
// releases, so Unlock said nil for a lock that had expired before it.
func TestExpiredUnlockWithSlowMastersIsNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 500 * time.Millisecond
		e, fs, _ := slowMasters(t, api.WithTTL(ttl))
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "expired-slow")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * ttl) // expired on every master
		for _, f := range fs[:3] {
			f.Pause()
		}
		done := make(chan error, 1)
		go func() { done <- l.Unlock(ctx) }()
		time.Sleep(300 * time.Millisecond)
		for _, f := range fs[:3] {
			f.Resume()
		}
		if err := <-done; !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("Unlock of a lock expired on every master, three masters slow: %v; want ErrNotHeld (it had already expired)", err)
		}
	})
}
