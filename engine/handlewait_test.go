package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport/faulty"
	"github.com/quorumlock/redlock/transport/memory"
)

// Unlock(ctx) and Extend(ctx) while an auto-extension is out (handle17).
//
// The auto-extension holds the lock's handle until the masters answer it or
// the master timeout passes, which users set to seconds for slow masters.
// Unlock's ctx "bounds only its wait", and an Extend whose ctx ended leaves
// the lock as it was: neither may wait for the handle past its ctx.

const (
	handleTTL           = 10 * time.Second
	handleMasterTimeout = 2 * time.Second
	handleDeadline      = 10 * time.Millisecond
)

// extensionOut returns an auto-extended lock whose auto-extension is out:
// every master is paused, so the extension waits in them for the master
// timeout (2 s) while it holds the lock's handle. In a synctest bubble.
func extensionOut(t *testing.T) (*engine.Engine, api.Lock, []*faulty.Transport, []*memory.Master) {
	t.Helper()
	e, fs, ms := slowMasters(t, api.WithTTL(handleTTL), api.WithMasterTimeout(handleMasterTimeout))
	t.Cleanup(func() { _ = e.Close() })
	l, err := e.Lock(context.Background(), "job", api.WithAutoExtend(0.5))
	if err != nil {
		t.Fatal(err)
	}
	until := l.Until()
	synctest.Wait() // every master has the key, not just the majority Lock waited for
	for _, f := range fs {
		f.Pause()
	}
	time.Sleep(handleTTL/2 + time.Millisecond) // due at half the validity
	synctest.Wait()
	for i, f := range fs {
		if f.Stats().Held == 0 {
			t.Fatalf("master %d holds no batch: the auto-extension is not out", i+1)
		}
	}
	if !l.Until().Equal(until) || l.Err() != nil {
		t.Fatalf("the auto-extension is not out: Until moved by %v, Err %v", l.Until().Sub(until), l.Err())
	}
	return e, l, fs, ms
}

// callWithDeadline runs f (an Unlock or an Extend) on its own goroutine
// with a ctx that ends handleDeadline from now, sleeps five times that, and
// returns what f returned and how long it took. It fails the test if f has
// not returned by then.
func callWithDeadline(t *testing.T, what string, f func(context.Context) error) (error, time.Duration) {
	t.Helper()
	type result struct {
		err  error
		took time.Duration
	}
	res := make(chan result, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), handleDeadline)
		defer cancel()
		err := f(ctx)
		res <- result{err, time.Since(start)}
	}()
	time.Sleep(5 * handleDeadline)
	select {
	case r := <-res:
		return r.err, r.took
	default:
		t.Fatalf("%s(ctx with a %v deadline) still waits %v later, while the auto-extension is out", what, handleDeadline, 5*handleDeadline)
		return nil, 0
	}
}

// inRealTime runs a synctest bubble (f) and crashes the test binary with
// msg if it has not returned within 10 s of real time. A goroutine blocked
// on a sync.Mutex is not durably blocked, so a bubble in which one waits
// for a holder that waits for the bubble's clock stands still for ever,
// and nothing inside the bubble can tell.
func inRealTime(t *testing.T, msg string, f func(*testing.T)) {
	stuck := time.AfterFunc(10*time.Second, func() { panic(t.Name() + ": " + msg) })
	defer stuck.Stop()
	synctest.Test(t, f)
}

const stuckMsg = "the bubble stands still 10 s (real time) into the test: a call is blocked on something not durable (a sync.Mutex), waiting for the auto-extension that holds the handle, whatever its ctx"

// Unlock with a short deadline while the auto-extension is out returns at
// its deadline with its ctx's error; the lock is given up at once (Done
// closed, ErrReleased), and once the masters answer no key is left on any
// of them, whether they answer before the extension's master timeout or
// after it (the release then goes on in the background).
func TestUnlockHonoursContextWhileAutoExtending(t *testing.T) {
	for _, tc := range []struct {
		name   string
		paused time.Duration // how long the masters stay paused after Unlock returned
	}{
		{"masters answer at once", 0},
		{"masters answer past the master timeout", handleMasterTimeout + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inRealTime(t, stuckMsg, func(t *testing.T) {
				granted := time.Now() // the bubble's clock: extensionOut takes the lock first thing
				_, l, fs, ms := extensionOut(t)
				err, took := callWithDeadline(t, "Unlock", l.Unlock)
				if took > handleDeadline+time.Millisecond {
					t.Errorf("Unlock(ctx with a %v deadline) returned after %v", handleDeadline, took)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Unlock whose ctx ended while the auto-extension was out: %v, want its ctx's error", err)
				}
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Op != "unlock" {
					t.Errorf("Unlock's error %v (%T) is not an *api.Error of op unlock", err, err)
				}
				select {
				case <-l.Done():
				default:
					t.Errorf("Done still open after Unlock returned: the lock is not given up")
				}
				if !errors.Is(l.Err(), api.ErrReleased) {
					t.Errorf("after Unlock, Err = %v, want ErrReleased", l.Err())
				}
				time.Sleep(tc.paused)
				for i, m := range ms {
					if n := m.Len(); n != 1 {
						t.Fatalf("master %d holds %d keys before it answers, want the lock's", i+1, n)
					}
				}
				for _, f := range fs {
					f.Resume()
				}
				time.Sleep(500 * time.Millisecond)
				synctest.Wait()
				if time.Since(granted) >= handleTTL {
					t.Fatalf("checked %v after the grant: the keys could have expired by their TTL", time.Since(granted))
				}
				for i, m := range ms {
					if n := m.Len(); n != 0 {
						t.Errorf("master %d holds %d keys after Unlock, %v before its TTL ends: the release was never sent", i+1, n, granted.Add(handleTTL).Sub(time.Now()))
					}
				}
			})
		})
	}
}

// Extend with a short deadline while the auto-extension is out returns at
// its deadline with its ctx's error, and leaves the lock as it was: held,
// extended by the auto-extension once the masters answer, and Extend may
// be called again.
func TestExtendHonoursContextWhileAutoExtending(t *testing.T) {
	inRealTime(t, stuckMsg, func(t *testing.T) {
		_, l, fs, ms := extensionOut(t)
		until := l.Until()
		err, took := callWithDeadline(t, "Extend", l.Extend)
		if took > handleDeadline+time.Millisecond {
			t.Errorf("Extend(ctx with a %v deadline) returned after %v", handleDeadline, took)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Extend whose ctx ended while the auto-extension was out: %v, want its ctx's error", err)
		}
		select {
		case <-l.Done():
			t.Fatalf("Done closed by an Extend whose ctx ended: %v", l.Err())
		default:
		}
		if l.Err() != nil || !l.Until().Equal(until) {
			t.Fatalf("an Extend whose ctx ended changed the lock: Err %v, Until moved by %v", l.Err(), l.Until().Sub(until))
		}
		for _, f := range fs {
			f.Resume()
		}
		time.Sleep(100 * time.Millisecond) // the answers come back within a few ms of the bubble's clock
		synctest.Wait()
		if !l.Until().After(until) || l.Err() != nil {
			t.Fatalf("the auto-extension did not go through once the masters answered: Until moved by %v, Err %v", l.Until().Sub(until), l.Err())
		}
		ctx := context.Background()
		if err := l.Extend(ctx); err != nil {
			t.Fatalf("Extend again: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		for i, m := range ms {
			if n := m.Len(); n != 0 {
				t.Errorf("master %d holds %d keys after Unlock", i+1, n)
			}
		}
	})
}
