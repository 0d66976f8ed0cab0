package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/actors"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// A held lock whose extension a coordinator's panic lost (coord19): the
// engine cannot tell whether a majority extended it, and it hit a bug, so
// the lock is given up at once: Done closes with a cause (ErrNotHeld)
// that tells of the api.ErrInternal, rather than staying open (until
// Until, or, for an Extend with no deadline, with its caller waiting
// forever). For a manual Extend and for an auto-extension. Unlock still
// releases it on every master, and the engine takes the key again
// afterwards.
func TestLockExtensionLostToCoordinatorPanic(t *testing.T) {
	for _, auto := range []bool{false, true} {
		name := "Extend"
		if auto {
			name = "auto-extension"
		}
		t.Run(name, func(t *testing.T) { testExtensionLost(t, auto) })
	}
}

func testExtensionLost(t *testing.T, auto bool) {
	ms := make([]*memory.Master, 3)
	ts := make([]transport.Transport, len(ms))
	for i := range ms {
		ms[i] = memory.New()
		ts[i] = ms[i].Transport()
	}
	var fired atomic.Bool
	actors.SetTestCoordHook(func(kind actors.CallKind, key string) bool {
		return kind == actors.Extend && key == "x" && fired.CompareAndSwap(false, true)
	})
	e, err := engine.NewWithTransports(ts, api.WithCoordinators(1), api.WithoutRestartQuarantine()) // fresh masters: no wait
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		actors.SetTestCoordHook(nil)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	opts := []api.LockOption{api.WithTTL(9 * time.Second)}
	if auto {
		opts = []api.LockOption{api.WithTTL(2 * time.Second), api.WithAutoExtend(0.25)}
	}
	l, err := e.Lock(ctx, "x", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !auto {
		// A deadline short of the lock's validity: without an answer,
		// Extend returns the context's error when it passes.
		ectx, ecancel := context.WithTimeout(ctx, 5*time.Second)
		err := l.Extend(ectx)
		ecancel()
		if !errors.Is(err, api.ErrInternal) || !errors.Is(err, actors.ErrCoordBoom) {
			t.Errorf("Extend lost to a coordinator's panic: %v; want api.ErrInternal wrapping the panic value", err)
		}
	}
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatalf("Done did not close after the coordinator's panic lost the extension (until %v)", l.Until())
	}
	if !fired.Load() {
		t.Fatal("no extension reached the coordinator")
	}
	// Lock.Err wraps one sentinel: ErrNotHeld, whose message tells of the
	// internal error (the extension's error is not in its chain).
	if err := l.Err(); !errors.Is(err, api.ErrNotHeld) || errors.Is(err, api.ErrExpired) || errors.Is(err, api.ErrInternal) ||
		!strings.Contains(err.Error(), api.ErrInternal.Error()) {
		t.Errorf("Err after the extension was lost: %v; want ErrNotHeld alone (not an expiry at Until), telling of the internal error", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	for i, m := range ms {
		if k := m.Len(); k != 0 {
			t.Errorf("master %d holds %d keys after Unlock", i, k)
		}
	}
	l2, err := e.TryLock(ctx, "x")
	if err != nil {
		t.Fatalf("TryLock after: %v", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Errorf("its Unlock: %v", err)
	}
}
