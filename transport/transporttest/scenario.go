package transporttest

import (
	"testing"

	"github.com/quorumlock/redlock/transport"
)

// FenceOverlap drives, op by op, the schedule of issue 9 finding 2 in which
// one slow attempt of lock 2 spans the whole life of lock 1 over five
// masters A to E: masters[i] is master i (A is 0) and keys[i] the lock key
// used on it. The keys must never have been used; the counters start at
// A=4, B=4, C=6, D=3, E=3.
//
//  1. lock 2's SET reaches D early (counter 3 -> 4), so lock 1 is refused there;
//  2. lock 1 wins A=5, B=5, C=7: its token is 7;
//  3. lock 1's write-back of 7 is lost on A and B but lands on C, D and E;
//  4. lock 1 releases;
//  5. lock 2's delayed SETs land on A and B (6, 6): lock 2 holds D, A, B, a
//     majority, with token max(4, 6, 6) = 6;
//  6. lock 2 writes 6 back to every master.
//
// A write-back that only "raises to at least T" confirms 6 everywhere, and
// lock 2 would be granted 6 after lock 1's 7. Under the contract the masters
// that took lock 1's 7 (C, D, E, a majority) refuse, so the attempt fails;
// the retry's SETs (A, B, C, D: 7, 7, 8, 8) give token 8, which every master
// confirms.
//
// Each master can be a separate transport (the real layout), or every entry
// a client of one master with a key of its own per entry: the rules are per
// key, so that runs the same schedule.
func FenceOverlap(t *testing.T, masters []transport.Transport, keys []string) {
	t.Helper()
	if len(masters) != 5 || len(keys) != 5 {
		t.Fatalf("FenceOverlap needs 5 masters and 5 keys, got %d and %d", len(masters), len(keys))
	}
	const (
		A, B, C, D, E = 0, 1, 2, 3, 4
		v1, v2        = "fence-overlap-lock-1", "fence-overlap-lock-2"
	)
	ttl := hold
	name := [...]string{"A", "B", "C", "D", "E"}
	raiseOp := func(m int, token int64, value string) transport.Op {
		return transport.Op{Kind: transport.RaiseFence, Key: keys[m], Value: value, Token: token}
	}
	// on runs one op on master m and checks its answer.
	on := func(what string, m int, op transport.Op, ok bool, token int64) {
		t.Helper()
		r := do(t, masters[m], op)[0]
		if r.Err != nil || r.OK != ok || (op.Kind == transport.AcquireFenced && r.Token != token) {
			t.Fatalf("%s on %s: %s: OK=%v Token=%d Err=%v, want OK=%v Token=%d", what, name[m], describe(op), r.OK, r.Token, r.Err, ok, token)
		}
	}

	// The counters before: each master's history of earlier grants.
	for m, n := range [...]int64{A: 4, B: 4, C: 6, D: 3, E: 3} {
		on("setup", m, raiseOp(m, n, "earlier-grant"), true, 0)
	}
	on("1. lock 2's early SET", D, fenced(keys[D], v2, ttl), true, 4)
	on("2. lock 1's SET", A, fenced(keys[A], v1, ttl), true, 5)
	on("2. lock 1's SET", B, fenced(keys[B], v1, ttl), true, 5)
	on("2. lock 1's SET", C, fenced(keys[C], v1, ttl), true, 7)
	on("2. lock 1's SET", D, fenced(keys[D], v1, ttl), false, 0)
	for _, m := range []int{C, D, E} {
		on("3. lock 1's write-back of 7", m, raiseOp(m, 7, v1), true, 0)
	}
	for _, m := range []int{A, B, C} {
		on("4. lock 1's release", m, rel(keys[m], v1), true, 0)
	}
	on("5. lock 2's late SET", A, fenced(keys[A], v2, ttl), true, 6)
	on("5. lock 2's late SET", B, fenced(keys[B], v2, ttl), true, 6)

	// 6. The write-back that decides: a majority must refuse it.
	var confirmed []string
	for m := range masters {
		r := do(t, masters[m], raiseOp(m, 6, v2))[0]
		if r.Err != nil {
			t.Fatalf("6. lock 2's write-back of 6 on %s: Err=%v, want a definite answer", name[m], r.Err)
		}
		if r.OK {
			confirmed = append(confirmed, name[m])
		}
		// A and B hold lock 2's own 6; C, D and E hold lock 1's 7.
		if want := m == A || m == B; r.OK != want {
			t.Errorf("6. lock 2's write-back of 6 on %s: OK=%v, want %v", name[m], r.OK, want)
		}
	}
	if len(confirmed) >= 3 {
		t.Fatalf("lock 2's token 6 was confirmed by %v, a majority: it would be granted after lock 1's 7", confirmed)
	}

	// The attempt failed: lock 2 cleans up and tries again with the same
	// value, and its new SETs give a larger token than lock 1's.
	for _, m := range []int{A, B, D} {
		on("lock 2's cleanup", m, rel(keys[m], v2), true, 0)
	}
	for m, n := range [...]int64{A: 7, B: 7, C: 8, D: 8} {
		on("lock 2's second SET", m, fenced(keys[m], v2, ttl), true, n)
	}
	for m := range masters {
		on("lock 2's write-back of 8", m, raiseOp(m, 8, v2), true, 0)
	}
	for _, m := range []int{A, B, C, D} {
		on("lock 2's release", m, rel(keys[m], v2), true, 0)
	}
}
