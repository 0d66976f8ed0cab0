package redis

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

func shared(kind transport.OpKind, key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: kind, Key: key, Value: value, TTL: ttl}
}

// pttlNear fails unless key's PTTL is within a second below want.
func pttlNear(t *testing.T, s *redistest.Server, key string, want time.Duration) {
	t.Helper()
	if ms := s.PTTL(t, key); ms > want.Milliseconds() || ms < (want-time.Second).Milliseconds() {
		t.Errorf("PTTL of %s = %dms, want about %v", key, ms, want)
	}
}

// TestSharedOnTheWire: readers are a sorted set at the lock key whose
// expiry follows its latest member, writer marks included, and the key is
// gone with its last member.
func TestSharedOnTheWire(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{
		shared(transport.AcquireShared, "k", "r1", time.Minute),
		shared(transport.AcquireShared, "k", "r2", 2*time.Minute),
	}, true, true)
	var typ string
	s.Do(t, &typ, "TYPE", "k")
	if typ != "zset" {
		t.Fatalf("TYPE k = %s, want zset", typ)
	}
	pttlNear(t, s, "k", 2*time.Minute)
	mustDo(t, tr, []transport.Op{shared(transport.AcquireExclusive, "k", "w", 3*time.Minute)}, false)
	pttlNear(t, s, "k", 3*time.Minute) // the writer's mark lives longest
	mustDo(t, tr, []transport.Op{
		shared(transport.ReleaseShared, "k", "w", 0), // gives up: not OK, the mark goes
		shared(transport.ReleaseShared, "k", "r2", 0),
	}, false, true)
	pttlNear(t, s, "k", time.Minute)
	mustDo(t, tr, []transport.Op{shared(transport.ReleaseShared, "k", "r1", 0)}, true)
	if n := s.DBSize(t); n != 0 {
		t.Errorf("%d keys left after the last reader left, want 0", n)
	}
	// A writer is a plain string with its PX.
	mustDo(t, tr, []transport.Op{shared(transport.AcquireExclusive, "k", "w", time.Minute)}, true)
	if v, ok := s.Get(t, "k"); !ok || v != "w" {
		t.Errorf("GET k = %q, %v after the writer's grant, want w", v, ok)
	}
	pttlNear(t, s, "k", time.Minute)
}

// TestNoScriptShared: after SCRIPT FLUSH the read-write ops are resent
// after loading the scripts they need, with their answers intact.
func TestNoScriptShared(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	s.Do(t, nil, "SCRIPT", "FLUSH")
	mustDo(t, tr, []transport.Op{
		shared(transport.AcquireShared, "r", "r1", time.Minute),
		shared(transport.ExtendShared, "r", "r1", time.Minute),
		shared(transport.AcquireExclusive, "w", "w1", time.Minute),
		shared(transport.ReleaseShared, "w", "w1", 0),
	}, true, true, true, true)
	if got := scriptsLoaded(t, s); got != "0000000111100" {
		t.Errorf("SCRIPT EXISTS after the resend = %s, want only the four read-write scripts", got)
	}
}
