package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// The engine reuses the Calls that carry Lock, TryLock, Extend and Unlock
// (actors/callpool.go). What a caller was handed must not change when the
// Calls behind it are reused for other keys: a held lock's handle, and the
// error of a TryLock that failed, are read after hundreds of other cycles,
// with contexts that never end (the WaitGroup signal) and that can (a
// channel), and still say what they said and still work.
func TestHandlesAndErrorsSurviveCallReuse(t *testing.T) {
	e, err := engine.NewMemory(5)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bg := context.Background()
	l, err := e.Lock(bg, "held", api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	key, value, token, until := l.Key(), l.Value(), l.Token(), l.Until()
	_, tryErr := e.TryLock(bg, "held")
	if !errors.Is(tryErr, api.ErrNotAcquired) {
		t.Fatalf("TryLock of a held key: %v", tryErr)
	}
	said := tryErr.Error()

	cctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	for i := range 300 {
		ctx := bg
		if i%2 == 1 {
			ctx = cctx
		}
		o, err := e.Lock(ctx, fmt.Sprintf("other-%d", i%7))
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Extend(ctx); err != nil {
			t.Fatal(err)
		}
		if err := o.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.TryLock(ctx, "held"); !errors.Is(err, api.ErrNotAcquired) {
			t.Fatalf("TryLock of a held key, cycle %d: %v", i, err)
		}
	}

	if l.Key() != key || l.Value() != value || l.Token() != token || !l.Until().Equal(until) {
		t.Errorf("the handle changed: %s %s %d %v, was %s %s %d %v", l.Key(), l.Value(), l.Token(), l.Until(), key, value, token, until)
	}
	if got := tryErr.Error(); got != said {
		t.Errorf("the TryLock error changed:\n%s\nwas\n%s", got, said)
	}
	if err := l.Extend(bg); err != nil {
		t.Fatalf("Extend of the held lock: %v", err)
	}
	if err := l.Unlock(bg); err != nil {
		t.Fatalf("Unlock of the held lock: %v", err)
	}
	if n, err := e.Lock(bg, "held"); err != nil {
		t.Fatalf("the key was not free after Unlock: %v", err)
	} else if err := n.Unlock(bg); err != nil {
		t.Fatal(err)
	}
}
