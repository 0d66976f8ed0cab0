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

// Done called after Until returns a closed channel even when the lock's
// timer has not run yet. On a starved process the timer and the holder
// wake in one late wake-up and the holder may run first; api.Lock promises
// Done is closed the moment the engine can no longer vouch for the lock, so
// asking after Until must not hand back an open channel (Err already
// checked the clock on every call; Done only did when it made the channel).
func TestDoneAfterUntilWhileTimerLate(t *testing.T) {
	synctest.Test(t, testDoneAfterUntilWhileTimerLate)
}

func testDoneAfterUntilWhileTimerLate(t *testing.T) {
	fired := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	engine.HoldLockTimers(t, fired, release)
	e := newMemory(t, 3, api.WithTTL(100*time.Millisecond))
	l, err := e.TryLock(context.Background(), "late-timer")
	if err != nil {
		t.Fatal(err)
	}
	held := l.Done()                  // arms the timer
	time.Sleep(time.Until(l.Until())) // fake time: the timer is due now
	<-fired                           // and its callback is held back
	select {
	case <-held:
		t.Fatal("Done closed although the timer's callback has not run: the hook holds nothing")
	default:
	}
	select {
	case <-l.Done():
	default:
		t.Fatalf("Done() called %v after Until returned an open channel while the timer was late", time.Since(l.Until()))
	}
	// The channel a holder already waits on is the same one: it closes too.
	select {
	case <-held:
	default:
		t.Fatal("the channel from the first Done call is still open")
	}
	if !errors.Is(l.Err(), api.ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", l.Err())
	}
}

// Before Until, Done stays open while the timer is held: settling the clock
// on every call must not end a lock early.
func TestDoneBeforeUntilStaysOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fired := make(chan struct{}, 1)
		release := make(chan struct{})
		defer close(release)
		engine.HoldLockTimers(t, fired, release)
		e := newMemory(t, 3, api.WithTTL(100*time.Millisecond))
		l, err := e.TryLock(context.Background(), "early")
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Done()
		time.Sleep(time.Until(l.Until()) - time.Nanosecond)
		select {
		case <-l.Done():
			t.Fatalf("Done closed %v before Until", time.Until(l.Until()))
		default:
		}
		if err := l.Err(); err != nil {
			t.Fatalf("Err before Until = %v", err)
		}
	})
}
