package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// The lock handle as a new user meets it (review newuser, 2026-11-29).

// README's pattern is `defer lock.Unlock(ctx)` with the ctx the work ran
// under. When that ctx has ended (a request cancelled, a job past its
// deadline), the Unlock must still give the lock up: before, it returned
// the ctx's error at once and the lock stayed held, auto-extended for up to
// MaxExtensions × the extension interval.
func TestUnlockWithEndedContextReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ts := memoryMasters(5)
		const ttl = time.Second
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx, cancel := context.WithCancel(context.Background())
		l, err := e.Lock(ctx, "job", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		cancel() // the request went away; the deferred Unlock runs now
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock with an ended context: %v, want the lock released", err)
		}
		if !errors.Is(l.Err(), api.ErrReleased) {
			t.Errorf("after Unlock with an ended context, Err = %v, want ErrReleased", l.Err())
		}
		time.Sleep(3 * ttl) // auto-extensions would have kept it
		other, err := e.TryLock(context.Background(), "job")
		if err != nil {
			t.Fatalf("%v after an Unlock with an ended context, the key is still held: %v", 3*ttl, err)
		}
		_ = other.Unlock(context.Background())
	})
}

// Extend that meets slow masters (no majority answered within the master
// timeout) leaves a lock that is still valid until Until: a retry may
// extend it, as auto-extension's retries do. Before, the one failure gave
// the lock up and every retry failed with "the lock was already lost".
func TestExtendUnreachableKeepsTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 5 * time.Second
		e, fs, _ := slowMasters(t, api.WithTTL(ttl))
		defer e.Close()
		ctx := context.Background()
		l, err := e.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs[:3] {
			f.Pause()
		}
		ectx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err = l.Extend(ectx)
		cancel()
		if err == nil {
			t.Fatal("Extend with three of five masters paused succeeded")
		}
		for _, f := range fs[:3] {
			f.Resume()
		}
		if l.Err() != nil {
			t.Fatalf("after one Extend that met slow masters (%v), %v before Until, the lock was given up: %v", err, time.Until(l.Until()).Round(time.Millisecond), l.Err())
		}
		if err := l.Extend(ctx); err != nil {
			t.Fatalf("Extend again once the masters answer: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A panic inside Extend (a nil ctx, a ctx or a TracerProvider that panics)
// recovered by the caller, as net/http recovers a handler's, must not leave
// the handle locked: the deferred Unlock would block for ever. (Real time:
// in a synctest bubble a goroutine blocked on a mutex is not durably
// blocked, so the bubble could not tell.)
func TestExtendPanicDoesNotWedgeTheHandle(t *testing.T) {
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		var nilCtx context.Context
		_ = l.Extend(nilCtx) //nolint:staticcheck // the misuse under test
	}()
	done := make(chan error, 1)
	go func() { done <- l.Unlock(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Unlock still blocks 10s after an Extend that panicked and was recovered: the handle's mutex was never released")
	}
}
