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

// Two Unlocks at once while the auto-extension is out: one whose ctx
// ends while it waits, one that waits as long as it takes. Both return,
// the lock ends released, and no master keeps the key once they answer.
// Then Close while a third caller (an Extend) waits for the handle.
func TestConcurrentUnlocksWhileAutoExtending(t *testing.T) {
	inRealTime(t, stuckMsg, func(t *testing.T) {
		_, l, fs, ms := extensionOut(t)
		waited := make(chan error, 1)
		go func() { waited <- l.Unlock(context.Background()) }()
		synctest.Wait()
		err, took := callWithDeadline(t, "Unlock", l.Unlock)
		if !errors.Is(err, context.DeadlineExceeded) || took > handleDeadline+time.Millisecond {
			t.Errorf("Unlock with a %v deadline, beside a waiting one: %v after %v", handleDeadline, err, took)
		}
		if !errors.Is(l.Err(), api.ErrReleased) {
			t.Errorf("Err = %v, want ErrReleased", l.Err())
		}
		for _, f := range fs {
			f.Resume()
		}
		if err := <-waited; err != nil && !errors.Is(err, api.ErrNotHeld) {
			t.Errorf("the waiting Unlock: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		for i, m := range ms {
			if n := m.Len(); n != 0 {
				t.Errorf("master %d holds %d keys after both Unlocks", i+1, n)
			}
		}
		if err := l.Unlock(context.Background()); !errors.Is(err, api.ErrNotHeld) {
			t.Errorf("a third Unlock: %v, want ErrNotHeld", err)
		}
	})
}

// Close while Extend and Unlock wait for the handle an auto-extension
// holds: both return (ErrClosed), without waiting for the masters.
func TestCloseWhileCallersWaitForTheHandle(t *testing.T) {
	inRealTime(t, stuckMsg, func(t *testing.T) {
		e, l, _, _ := extensionOut(t)
		ext, unl := make(chan error, 1), make(chan error, 1)
		go func() { ext <- l.Extend(context.Background()) }()
		go func() { unl <- l.Unlock(context.Background()) }()
		synctest.Wait()
		start := time.Now()
		closed := make(chan error, 1)
		go func() { closed <- e.Close() }()
		if err := <-ext; !errors.Is(err, api.ErrClosed) {
			t.Errorf("Extend that waited for the handle across Close: %v, want ErrClosed", err)
		}
		if err := <-unl; !errors.Is(err, api.ErrClosed) {
			t.Errorf("Unlock that waited for the handle across Close: %v, want ErrClosed", err)
		}
		<-closed
		t.Logf("Close took %v", time.Since(start))
		if !errors.Is(l.Err(), api.ErrClosed) {
			t.Errorf("Err = %v, want ErrClosed", l.Err())
		}
	})
}
