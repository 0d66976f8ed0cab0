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

// The channel a holder takes from Done when its section begins closes at
// the handle's Until exactly, whatever kind of handle it is and however its
// validity was moved: a mutex, a semaphore permit (a slot's lock), a
// reader, a writer, after a manual Extend made before or after Done was
// first called, and after auto-extensions ran out. Torture runs on loaded
// machines saw holders run hundreds of milliseconds past Until with the
// channel in hand still open (a semaphore permit among them); in a synctest
// bubble no scheduling delay exists, so a Done that closed after Until here
// would be the engine's timer armed late or re-armed past the deadline, and
// one that closed before it would end a valid lock early.
func TestDoneClosesAtUntil(t *testing.T) {
	const ttl = 100 * time.Millisecond
	type take func(context.Context, *engine.Engine) (api.Lock, error)
	mutex := func(opts ...api.LockOption) take {
		return func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TryLock(ctx, "k", opts...) }
	}
	permit := func(opts ...api.LockOption) take {
		return func(ctx context.Context, e *engine.Engine) (api.Lock, error) {
			return e.TrySemaphore(ctx, "sem", 3, opts...)
		}
	}
	cases := []struct {
		name string
		take take
		// before runs between the grant and the holder's Done call, after
		// between that call and the wait.
		before, after func(*testing.T, api.Lock)
	}{
		{name: "mutex", take: mutex()},
		{name: "fenced mutex", take: mutex(api.WithFencing(true))},
		{name: "semaphore permit", take: permit()},
		{name: "fenced semaphore permit", take: permit(api.WithFencing(true))},
		{name: "reader", take: func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TryRLock(ctx, "rw") }},
		{name: "writer", take: func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TryWLock(ctx, "rw") }},
		{name: "mutex extended after Done", take: mutex(), after: extendLater},
		{name: "mutex extended before Done", take: mutex(), before: extendLater},
		{name: "permit extended after Done", take: permit(), after: extendLater},
		{name: "permit extended before Done", take: permit(), before: extendLater},
		{name: "reader extended after Done", take: func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TryRLock(ctx, "rw") }, after: extendLater},
		{name: "auto-extended mutex", take: mutex(api.WithAutoExtend(0.5), api.WithMaxExtensions(3)), after: wantExtended(3)},
		{name: "auto-extended permit", take: permit(api.WithAutoExtend(0.5), api.WithMaxExtensions(3)), after: wantExtended(3)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMemory(t, 3, api.WithTTL(ttl))
				ctx := context.Background()
				l, err := c.take(ctx, e)
				if err != nil {
					t.Fatal(err)
				}
				granted := l.Until()
				if c.before != nil {
					c.before(t, l)
				}
				done := l.Done() // the channel in hand, as a holder's section takes it
				if c.after != nil {
					c.after(t, l)
				}
				select {
				case <-done:
				case <-time.After(100 * ttl):
					t.Fatalf("Done never closed (Until %v from now)", time.Until(l.Until()))
				}
				now, until := time.Now(), l.Until()
				if !now.Equal(until) {
					t.Fatalf("Done closed %v from Until (Until moved %v past the grant's)", now.Sub(until), until.Sub(granted))
				}
				if !errors.Is(l.Err(), api.ErrExpired) {
					t.Fatalf("Err = %v, want ErrExpired", l.Err())
				}
			})
		})
	}
}

// extendLater extends l once half its validity has passed, so that Until
// moves past the deadline a timer armed at the grant would keep.
func extendLater(t *testing.T, l api.Lock) {
	t.Helper()
	before := l.Until()
	time.Sleep(time.Until(before) / 2)
	if err := l.Extend(context.Background()); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !l.Until().After(before) {
		t.Fatalf("Extend left Until at %v, want it moved past %v", l.Until(), before)
	}
}

// wantExtended waits until l's Until has moved n times by auto-extension
// (each at least a tick after the previous), so that the case checks the
// deadline after the last extension rather than the grant's.
func wantExtended(n int) func(*testing.T, api.Lock) {
	return func(t *testing.T, l api.Lock) {
		t.Helper()
		last := l.Until()
		for moved := 0; moved < n; {
			time.Sleep(time.Millisecond)
			if u := l.Until(); u.After(last) {
				moved, last = moved+1, u
			}
			if l.Err() != nil {
				t.Fatalf("lost after %d auto-extensions: %v", moved, l.Err())
			}
		}
	}
}
