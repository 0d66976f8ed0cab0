package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
)

// Unlock called while the lock is valid, made to wait for the handle by an
// auto-extension that is out across Until (slow masters; a share of 0.9
// leaves less than the master timeout between the extension and Until),
// finds the lock expired once it has the handle: the timer ended it at
// Until, which also ended the extension. Its release gets through (the keys
// outlive Until by the drift allowance). The lock did not run out before
// Unlock was called, so Unlock must not say ErrExpired, whose doc is "a
// lock whose Until had passed": the caller's work did not outrun it.
func TestUnlockCalledBeforeUntilIsNotExpired(t *testing.T) {
	inRealTime(t, stuckMsg, func(t *testing.T) {
		e, fs, ms := slowMasters(t, api.WithTTL(handleTTL), api.WithMasterTimeout(handleMasterTimeout))
		defer e.Close()
		l, err := e.Lock(context.Background(), "late", api.WithAutoExtend(0.9))
		if err != nil {
			t.Fatal(err)
		}
		until := l.Until()
		synctest.Wait()
		for _, f := range fs {
			f.Pause()
		}
		time.Sleep(time.Until(until) - 500*time.Millisecond) // the auto-extension (due at 0.9 of the validity) is out
		synctest.Wait()
		if fs[0].Stats().Held == 0 || !l.Until().Equal(until) {
			t.Fatalf("the auto-extension is not out")
		}
		called := time.Now()
		res := make(chan error, 1)
		go func() { res <- l.Unlock(context.Background()) }()
		time.Sleep(time.Until(until) + time.Millisecond) // the timer ends the lock at Until, and the extension with it
		synctest.Wait()
		for _, f := range fs {
			f.Resume()
		}
		err = <-res
		if !called.Before(until) {
			t.Fatalf("Unlock called %v after Until: the test meant before", called.Sub(until))
		}
		if errors.Is(err, api.ErrExpired) {
			t.Errorf("Unlock called %v before Until, held up by the auto-extension out: %v; the lock had not expired when Unlock was called", until.Sub(called), err)
		} else if err != nil {
			t.Errorf("Unlock: %v", err)
		}
		synctest.Wait()
		for i, m := range ms {
			if n := m.Len(); n != 0 {
				t.Errorf("master %d holds %d keys after Unlock", i+1, n)
			}
		}
	})
}
