package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/redistest"
)

// The SETs of a failed attempt can land late: three of five redis-servers
// are stopped (SIGSTOP) through a TryLock, which fails once they have been
// silent for its TTL, and past its background cleanup's horizon; the SETs
// and releases they were sent wait in their sockets. When they continue
// they must apply the release after the SET it follows (one connection,
// per-key order in the node), so no key of the failed TryLock is left.
func TestRedisLateSetAfterFailedAttemptLeavesNoKey(t *testing.T) {
	servers := redistest.Start(t, 5)
	const ttl = time.Second
	e := redisEngine(t, servers, api.WithMasterTimeout(100*time.Millisecond), api.WithTTL(ttl))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range servers[:3] {
		s.Pause()
	}
	_, err := e.TryLock(ctx, "late-set")
	if !errors.Is(err, api.ErrQuorumUnreachable) {
		for _, s := range servers[:3] {
			s.Resume()
		}
		t.Fatalf("TryLock with three masters stopped: %v, want ErrQuorumUnreachable once they were silent for the TTL", err)
	}
	// Past the background cleanup's horizon (about two TTLs from the
	// attempt): the fault, not a wait for an event.
	time.Sleep(3 * ttl)
	for _, s := range servers[:3] {
		s.Resume()
	}
	// Close lets the nodes send what is queued and waits for the batches
	// in flight: the stopped masters have answered everything by then.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		if keys := s.Keys(t, "*"); len(keys) != 0 {
			t.Fatalf("master %d holds %v (pttl %d ms) after a failed TryLock whose SET landed late", i, keys, s.PTTL(t, keys[0]))
		}
	}
}
