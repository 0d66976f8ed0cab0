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

// Extend whose ctx ends while it waits for the handle says "the lock stays
// as it was, held until Until, and Extend may be called again" (api.Lock's
// Extend). Of a lock that was already given up before it that is false:
// here an Extend (ctx without end) is out on slow masters, holding the
// handle up to the master timeout, and an Unlock whose ctx ended meanwhile
// gave the lock up (Done closed, ErrReleased). A second Extend must then
// say ErrNotHeld, as it does when the handle is free, not its ctx's error.
func TestExtendOfAReleasedLockWhileExtendingIsNotHeld(t *testing.T) {
	inRealTime(t, stuckMsg, func(t *testing.T) {
		e, fs, _ := slowMasters(t, api.WithTTL(handleTTL), api.WithMasterTimeout(handleMasterTimeout))
		defer e.Close()
		l, err := e.Lock(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, f := range fs {
			f.Pause()
		}
		first := make(chan error, 1)
		go func() { first <- l.Extend(context.Background()) }()
		synctest.Wait()
		if err, _ := callWithDeadline(t, "Unlock", l.Unlock); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Unlock: %v, want its ctx's error", err)
		}
		if !errors.Is(l.Err(), api.ErrReleased) {
			t.Fatalf("Err after Unlock: %v", l.Err())
		}
		err, _ = callWithDeadline(t, "Extend", l.Extend)
		if !errors.Is(err, api.ErrNotHeld) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Extend of a lock released before it (Err %v), while another Extend is out: %v, want ErrNotHeld alone", l.Err(), err)
		}
		for _, f := range fs {
			f.Resume()
		}
		if err := <-first; !errors.Is(err, api.ErrNotHeld) {
			t.Errorf("the Extend that was out: %v, want ErrNotHeld", err)
		}
		if err := l.Extend(context.Background()); !errors.Is(err, api.ErrNotHeld) {
			t.Errorf("Extend once the handle is free: %v, want ErrNotHeld", err)
		}
	})
}
