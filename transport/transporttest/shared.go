package transporttest

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/internal/model"
)

// The read-write part of the contract (capability transport.Shared).

func racq(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.AcquireShared, Key: key, Value: value, TTL: ttl}
}

func rrel(key, value string) transport.Op {
	return transport.Op{Kind: transport.ReleaseShared, Key: key, Value: value}
}

func rext(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.ExtendShared, Key: key, Value: value, TTL: ttl}
}

func wacq(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.AcquireExclusive, Key: key, Value: value, TTL: ttl}
}

// testShared: readers share a key, a writer excludes readers and readers a
// writer, plain locks and read-write holders exclude each other, and a
// release or extend touches only its own value.
func testShared(t *testing.T, s *suite) {
	ks := keyspace(t)
	k, w, p := ks("k"), ks("w"), ks("plain")
	c, other := s.client(t), s.client(t)
	expect(t, c,
		step{racq(k, "r1", hold), true},
		step{racq(k, "r2", hold), true}, // readers share
		step{racq(k, "r1", hold), true}, // a reader admitted again keeps one entry
	)
	expect(t, other,
		step{acq(k, "m", hold), false},             // a mutex finds the key taken
		step{rel(k, "r1"), false},                  // plain ops answer "no" on a key with readers
		step{ext(k, "r1", hold), false},            //
		step{rext(k, "r1", hold), true},            // a live reader extends
		step{rext(k, "nobody", hold), false},       // a stranger does not
		step{rrel(k, "nobody"), false},             // nor release
		step{rrel(k, "r1"), true},                  // each reader releases its own entry
		step{rrel(k, "r1"), false},                 // once
		step{rext(k, "r1", hold), false},           // and cannot come back by extending
		step{racq(k, "r3", hold), true},            // readers still admitted
		step{rrel(k, "r2"), true},                  //
		step{rrel(k, "r3"), true},                  // the last reader leaves: the key is free
		step{acq(k, "m", hold), true},              // for a mutex
		step{racq(k, "r4", hold), false},           // which excludes readers
		step{wacq(k, "w1", hold), false},           // and writers
		step{rext(k, "m", hold), true},             // ExtendShared works on a plain holder
		step{rrel(k, "m"), true},                   // and ReleaseShared too
		step{wacq(w, "w1", hold), true},            // a writer on a free key
		step{wacq(w, "w1", hold), false},           // not re-entrant
		step{wacq(w, "w2", hold), false},           // excludes writers
		step{racq(w, "r1", hold), false},           // and readers
		step{acq(w, "m", hold), false},             // and a mutex
		step{rel(w, "w1"), true},                   // the writer is a plain value: plain Release frees it
		step{wacq(p, "w1", hold), true},            //
		step{ext(p, "w1", hold), true},             // and plain Extend extends it
		step{rrel(p, "w2"), false},                 // a stranger's release leaves it
		step{racq(p, "r1", hold), false},           //
		step{rrel(p, "w1"), true},                  //
		step{racq(p, "r1", hold), true},            // freed
		step{rrel(p, "r1"), true},                  //
		step{racq(ks("missing"), "r", hold), true}, // a missing key is free
		step{rrel(ks("missing"), "r"), true},       //
	)
	if s.caps.Has(transport.Fencing) {
		// The fenced acquire above hit a key held by readers: it must have
		// been refused. Checked apart, since without Fencing it is not sent.
		f := ks("f")
		expect(t, c, step{racq(f, "r", hold), true}, step{fenced(f, "m", hold), false}, step{rrel(f, "r"), true})
	}
}

// testWriterWaits: a writer refused by live readers leaves a marker that
// turns new readers away, while the readers in place keep their hold
// (release, extend); once they are gone the writer gets in, and its grant,
// its giving up (ReleaseShared) or its marker's own expiry lets readers in
// again.
func testWriterWaits(t *testing.T, s *suite) {
	ks := keyspace(t)
	k, g, e := ks("k"), ks("giveup"), ks("expire")
	c := s.client(t)
	expect(t, c,
		step{racq(k, "r1", hold), true},
		step{racq(k, "r2", hold), true},
		step{wacq(k, "w", hold), false},  // refused: live readers; leaves its marker
		step{racq(k, "r3", hold), false}, // a new reader waits behind the writer
		step{racq(k, "r1", hold), false}, // even one already in asks in vain
		step{rext(k, "r1", hold), true},  // but readers in place keep extending
		step{acq(k, "m", hold), false},   // the key exists for plain ops
		step{rrel(k, "r1"), true},
		step{wacq(k, "w2", hold), false}, // another writer is refused too while r2 reads
		step{rrel(k, "r2"), true},
		step{racq(k, "r3", hold), false}, // only markers left: still no reader
		step{wacq(k, "w", hold), true},   // the writer gets in, markers (w2's too) go
		step{racq(k, "r3", hold), false}, // the writer holds it
		step{rrel(k, "w"), true},
		step{racq(k, "r3", hold), true}, // the key is free again
		step{rrel(k, "r3"), true},
		step{acq(k, "m", hold), true}, // and nothing is left of the markers
		step{rel(k, "m"), true},

		// A writer that gives up drops its marker with ReleaseShared.
		step{racq(g, "r1", hold), true},
		step{wacq(g, "w", hold), false},
		step{racq(g, "r2", hold), false},
		step{rrel(g, "w"), false}, // it held nothing: not OK, but the marker goes
		step{racq(g, "r2", hold), true},
		step{rrel(g, "r1"), true},
		step{rrel(g, "r2"), true},
		step{acq(g, "m", hold), true},
		step{rel(g, "m"), true},
	)
	// A marker expires on its own: a writer that crashed blocks new
	// readers for its ttl at most.
	expect(t, c,
		step{racq(e, "r1", hold), true},
		step{wacq(e, "w", 50*time.Millisecond), false},
		step{racq(e, "r2", hold), false},
	)
	time.Sleep(120 * time.Millisecond)
	expect(t, c,
		step{racq(e, "r2", hold), true},
		step{rrel(e, "r1"), true},
		step{rrel(e, "r2"), true},
		step{acq(e, "m", hold), true},
		step{rel(e, "m"), true},
	)
}

// testSharedExpiry: every reader expires on its own; an expired reader
// neither blocks a writer nor can be extended or released; and the key
// lives as long as its latest reader, so it leaves nothing behind.
func testSharedExpiry(t *testing.T, s *suite) {
	ks := keyspace(t)
	k, all, w := ks("k"), ks("all"), ks("w")
	c := s.client(t)
	start := time.Now()
	expect(t, c,
		step{racq(k, "short", 50*time.Millisecond), true},
		step{racq(k, "long", 2*time.Second), true},
		step{racq(all, "a", 50*time.Millisecond), true},
		step{racq(all, "b", 60*time.Millisecond), true},
		step{rext(all, "b", 2*time.Second), true},       // extended past the others
		step{rext(all, "b", 70*time.Millisecond), true}, // and shortened again
		step{wacq(w, "w", 50*time.Millisecond), true},
	)
	time.Sleep(150*time.Millisecond - time.Since(start))
	expect(t, c,
		step{rext(k, "short", hold), false}, // expired: not revived
		step{rrel(k, "short"), false},
		step{rext(k, "long", hold), true},
		step{wacq(k, "w", hold), false}, // the live reader still blocks a writer
		step{rrel(k, "long"), true},
		step{wacq(k, "w", hold), true}, // the expired one does not
		step{rrel(k, "w"), true},
		// Every reader of all expired, so the key did: a mutex gets it.
		step{acq(all, "m", hold), true},
		step{rel(all, "m"), true},
		step{racq(w, "r", hold), true}, // the writer expired like any lock
		step{rrel(w, "r"), true},
	)
}

// testSharedModel runs random read-write ops, mixed with plain ones, through
// the reference model.
func testSharedModel(t *testing.T, s *suite) {
	ks := keyspace(t)
	keys := []string{ks("a"), ks("b")}
	c := s.client(t)
	m := model.New()
	kinds := []func(k, v string) transport.Op{
		func(k, v string) transport.Op { return racq(k, v, hold) },
		func(k, v string) transport.Op { return racq(k, v, hold) },
		func(k, v string) transport.Op { return rrel(k, v) },
		func(k, v string) transport.Op { return rext(k, v, hold) },
		func(k, v string) transport.Op { return wacq(k, v, hold) },
		func(k, v string) transport.Op { return acq(k, v, hold) },
		func(k, v string) transport.Op { return rel(k, v) },
		func(k, v string) transport.Op { return ext(k, v, hold) },
	}
	values := []string{"a", "b", "c"}
	seed := uint64(time.Now().UnixNano())
	x := seed
	next := func(n int) int { // xorshift: enough to mix, and the seed is logged
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	for round := range 20 {
		ops := make([]transport.Op, 10)
		for i := range ops {
			ops[i] = kinds[next(len(kinds))](keys[next(len(keys))], values[next(len(values))])
		}
		res := do(t, c, ops...)
		for i, op := range ops {
			if err := m.Check(op, res[i]); err != nil {
				t.Fatalf("seed %d, round %d, op %d %s: %v", seed, round, i, describe(op), err)
			}
		}
	}
	// Leave nothing: release every value everywhere.
	var clean []transport.Op
	for _, k := range keys {
		for _, v := range values {
			clean = append(clean, rrel(k, v))
		}
	}
	do(t, c, clean...)
	expect(t, c, step{acq(keys[0], "m", hold), true}, step{acq(keys[1], "m", hold), true},
		step{rel(keys[0], "m"), true}, step{rel(keys[1], "m"), true})
}
