package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/redistest"
)

// On real masters: three of five redis-server processes are stopped
// (SIGSTOP, as a starved or paused process is) for three master timeouts
// while a TryLock and then an Unlock run. Each answers everything it was
// sent when it continues, so both calls must succeed, late, instead of
// failing with ErrQuorumUnreachable; and no key is left.
func TestRedisPausedMastersAreLatency(t *testing.T) {
	servers := redistest.Start(t, 5)
	const timeout = 100 * time.Millisecond
	e := redisEngine(t, servers, api.WithMasterTimeout(timeout))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stall := func(call func() error) error {
		for _, s := range servers[:3] {
			s.Pause()
		}
		done := make(chan error, 1)
		go func() { done <- call() }()
		// The stall's length is the fault, not a wait for an event: any
		// length past the master timeout makes the masters slow.
		time.Sleep(3 * timeout)
		for _, s := range servers[:3] {
			s.Resume()
		}
		return <-done
	}
	var l api.Lock
	if err := stall(func() (err error) { l, err = e.TryLock(ctx, "paused-slow"); return err }); err != nil {
		t.Fatalf("TryLock while three masters were stopped for three master timeouts: %v (unreachable: %v); want the lock once they continue",
			err, errors.Is(err, api.ErrQuorumUnreachable))
	}
	if err := stall(func() error { return l.Unlock(ctx) }); err != nil {
		t.Fatalf("Unlock while three masters were stopped for three master timeouts: %v (unreachable: %v); want nil once they continue",
			err, errors.Is(err, api.ErrQuorumUnreachable))
	}
	// Unlock returns once a majority released: a release that timed out
	// on a master starved with the rest of the machine may still be on its
	// way, or be sent again in the background (keys16), so the keys go
	// within a few cleanups, not at once, and well before their TTL.
	keysGone(t, servers, 5*time.Second)
}
