// Package transporttest is the conformance suite for transport.Transport. It
// checks the contract documented in package transport against a live master,
// so every transport (the ones in this module, and yours) should run it from
// its own tests:
//
//	func TestConformance(t *testing.T) {
//		addr := startMaster(t) // however your transport finds a master
//		transporttest.Run(t, func(t *testing.T) transport.Transport {
//			c, err := mytransport.Dial(addr)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return c
//		})
//	}
//
// The suite has a required part, which every transport must pass, and parts
// that run only for the capabilities a transport declares (see
// transport.Capabler): the fenced and fence overlap subtests need
// transport.Fencing, multi needs transport.MultiKey, shared, writer_waits,
// shared_expiry and shared_model need transport.Shared, and each is skipped,
// saying so, on a transport that does not declare it. A minimal transport
// (Acquire, Release and Extend on single keys, no Capabler) passes the
// required part, which also checks that it answers every op it lacks with an
// error wrapping errors.ErrUnsupported, without applying it (the unsupported
// subtest; transport.CheckFor does it). The optional subtests check the
// optional interfaces a transport implements: for one that says it is
// immediate (transport.Immediate), that its Do does not wait on the clock.
//
// Every call of newClient must return a new client of one and the same
// master. The suite closes every client it gets. It writes only keys under a
// random "transporttest:{<hex>}:" prefix per subtest, each with a ttl of at most
// 10s, so it can share a real redis-server that holds other data, and it leaves
// no lock key behind for longer than that.
//
// Fencing counters are the exception: they never expire, and no op deletes
// them, so the fenced, fence overlap, errors, order and concurrent-do
// subtests leave up to about 200 counters behind on every run (on Redis,
// keys named transport.FenceKey("transporttest:{<hex>}:...")). Each is a small
// hash; delete them with redis-cli --scan --pattern 'redlock-fence:transporttest:*'
// if they bother you.
//
// The suite measures ttls on the wall against the master's expiry, with
// margins of 100ms or more, so a master farther away than that (or a badly
// overloaded test machine) will see the extend, expiry, fenced and multi
// subtests fail. It takes about a second, most of it waiting for keys to
// expire.
package transporttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/internal/model"
)

// hold is the ttl of keys that must stay held for the whole subtest.
const hold = 10 * time.Second

// Run runs the conformance suite. newClient returns a new client of one and
// the same master each time it is called; the master may hold other data (the
// suite uses unique random keys), so it works against a shared real
// redis-server too. The suite closes every client it creates.
func Run(t *testing.T, newClient func(t *testing.T) transport.Transport) {
	t.Helper()
	s := &suite{newClient: newClient}
	s.caps = transport.CapabilitiesOf(s.client(t))
	for _, sub := range []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"acquire", testAcquire},
		{"contend", testContend},
		{"release", testRelease},
		{"extend", testExtend},
		{"expiry", testExpiry},
		{"fenced", needs(transport.Fencing, testFenced)},
		{"fence overlap", needs(transport.Fencing, testFenceOverlap)},
		{"multi", needs(transport.MultiKey, testMulti)},
		{"shared", needs(transport.Shared, testShared)},
		{"writer waits", needs(transport.Shared, testWriterWaits)},
		{"shared expiry", needs(transport.Shared, testSharedExpiry)},
		{"shared model", needs(transport.Shared, testSharedModel)},
		{"unsupported", testUnsupported},
		{"order", testOrder},
		{"concurrent-do", testConcurrentDo},
		{"ctx not kept", testCtxNotKept},
		{"errors", testErrors},
		{"close", testClose},
		{"optional", testOptional},
	} {
		t.Run(sub.name, func(t *testing.T) { sub.run(t, s) })
	}
}

type suite struct {
	newClient func(t *testing.T) transport.Transport
	caps      transport.Capabilities // what the transport declares
}

// needs runs test only if the transport declares capability c.
func needs(c transport.Capabilities, test func(*testing.T, *suite)) func(*testing.T, *suite) {
	return func(t *testing.T, s *suite) {
		if !s.caps.Has(c) {
			t.Skipf("the transport does not declare the %s capability (its Capabilities() is %v), so this part of the contract "+
				"is not checked and the engine refuses the features that need it; to declare it, implement the ops and have "+
				"Capabilities() (transport.Capabler) include transport.%s", c, s.caps, capName[c])
		}
		test(t, s)
	}
}

var capName = map[transport.Capabilities]string{transport.Fencing: "Fencing", transport.MultiKey: "MultiKey", transport.Shared: "Shared"}

// client returns a new client that is closed when t ends.
func (s *suite) client(t *testing.T) transport.Transport {
	t.Helper()
	c := s.newClient(t)
	if c == nil {
		t.Fatal("newClient returned nil")
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keyspace returns a function that names keys under a prefix no other run,
// subtest or user of a shared master can collide with.
func keyspace(t *testing.T) func(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// The random part is a Redis Cluster hash tag, so that a subtest's keys
	// share one slot and its multi-key ops run on a cluster too.
	prefix := "transporttest:{" + hex.EncodeToString(b[:]) + "}:"
	return func(name string) string { return prefix + name }
}

func acq(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.Acquire, Key: key, Value: value, TTL: ttl}
}

func rel(key, value string) transport.Op {
	return transport.Op{Kind: transport.Release, Key: key, Value: value}
}

func ext(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.Extend, Key: key, Value: value, TTL: ttl}
}

func fenced(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.AcquireFenced, Key: key, Value: value, TTL: ttl}
}

// raise is the write-back of token by the lock whose value is owner.
func raise(key string, token int64, owner string) transport.Op {
	return transport.Op{Kind: transport.RaiseFence, Key: key, Value: owner, Token: token}
}

// multi returns the multi-key op of kind over keys (Key is keys[0]).
func multi(kind transport.OpKind, keys []string, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: kind, Key: keys[0], Keys: keys, Value: value, TTL: ttl}
}

func describe(op transport.Op) string {
	switch {
	case op.Kind == transport.RaiseFence:
		return fmt.Sprintf("%s(key=%q token=%d value=%q)", op.Kind, op.Key, op.Token, op.Value)
	case len(op.Keys) > 0:
		return fmt.Sprintf("%s(keys=%q value=%q ttl=%v)", op.Kind, op.Keys, op.Value, op.TTL)
	}
	return fmt.Sprintf("%s(key=%q value=%q ttl=%v)", op.Kind, op.Key, op.Value, op.TTL)
}

// step is one op of a batch and the OK it must get (with a nil Err).
type step struct {
	op transport.Op
	ok bool
}

// do sends ops as one batch that must not fail as a whole.
func do(t *testing.T, c transport.Transport, ops ...transport.Op) []transport.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hold)
	defer cancel()
	res := make([]transport.Result, len(ops))
	if err := c.Do(ctx, ops, res); err != nil {
		t.Fatalf("Do(%d ops): unexpected batch error: %v", len(ops), err)
	}
	return res
}

// expect sends steps as one batch and checks every result.
func expect(t *testing.T, c transport.Transport, steps ...step) {
	t.Helper()
	for _, m := range mismatches(t, c, steps...) {
		t.Error(m)
	}
}

// mismatches sends steps as one batch and says which results differ from
// the steps' (expect, for a test that may have to discard them).
func mismatches(t *testing.T, c transport.Transport, steps ...step) []string {
	t.Helper()
	ops := make([]transport.Op, len(steps))
	for i, s := range steps {
		ops[i] = s.op
	}
	var bad []string
	for i, r := range do(t, c, ops...) {
		if r.Err != nil || r.OK != steps[i].ok {
			bad = append(bad, fmt.Sprintf("op %d %s: OK=%v Err=%v, want OK=%v Err=nil", i, describe(ops[i]), r.OK, r.Err, steps[i].ok))
		}
	}
	return bad
}

func testAcquire(t *testing.T, s *suite) {
	k := keyspace(t)("k")
	c, other := s.client(t), s.client(t)
	expect(t, c, step{acq(k, "v1", hold), true})
	expect(t, c, step{acq(k, "v2", hold), false})
	// NX refuses the holder's own value too: Acquire is not re-entrant.
	expect(t, c, step{acq(k, "v1", hold), false})
	// Both clients must see the one master.
	expect(t, other, step{acq(k, "v3", hold), false})
}

func testContend(t *testing.T, s *suite) {
	const perClient, rounds = 8, 10
	ks := keyspace(t)
	clients := []transport.Transport{s.client(t), s.client(t)}
	ctx, cancel := context.WithTimeout(t.Context(), hold)
	defer cancel()
	for r := range rounds {
		k := ks(fmt.Sprint(r))
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			winners []string
		)
		for ci, c := range clients {
			for g := range perClient {
				v := fmt.Sprintf("c%d-g%d", ci, g)
				wg.Go(func() {
					<-start
					res := make([]transport.Result, 1)
					err := c.Do(ctx, []transport.Op{acq(k, v, hold)}, res)
					switch {
					case err != nil || res[0].Err != nil:
						t.Errorf("round %d: Acquire %s: batch error %v, op error %v", r, v, err, res[0].Err)
					case res[0].OK:
						mu.Lock()
						winners = append(winners, v)
						mu.Unlock()
					}
				})
			}
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d of %d racing Acquires won (%v), want exactly 1",
				r, len(winners), perClient*len(clients), winners)
		}
		// The winner is the one the master kept.
		expect(t, clients[1], step{rel(k, winners[0]), true})
	}
}

func testRelease(t *testing.T, s *suite) {
	ks := keyspace(t)
	k, missing := ks("k"), ks("missing")
	c := s.client(t)
	expect(t, c, step{acq(k, "v1", hold), true})
	expect(t, c, step{rel(k, "v2"), false})
	expect(t, c, step{acq(k, "v3", hold), false}) // the wrong-value Release left it held
	expect(t, c, step{rel(k, "v1"), true})
	expect(t, c, step{acq(k, "v4", hold), true}) // the right-value Release freed it
	expect(t, c, step{rel(k, "v1"), false})      // the old holder cannot release the new one
	expect(t, c, step{rel(missing, "v1"), false})
}

func testExtend(t *testing.T, s *suite) {
	ks := keyspace(t)
	longer, shorter, missing := ks("longer"), ks("shorter"), ks("missing")
	c := s.client(t)
	start := time.Now()
	expect(t, c,
		step{acq(longer, "v", 150*time.Millisecond), true},
		step{ext(longer, "other", 2*time.Second), false},
		step{ext(longer, "v", 2*time.Second), true},
		// Extend sets a new ttl rather than adding to the old one, so it
		// can also shorten a lock.
		step{acq(shorter, "v", hold), true},
		step{ext(shorter, "v", 50*time.Millisecond), true},
		step{ext(missing, "v", hold), false},
	)
	// Extend never creates a missing key.
	expect(t, c, step{acq(missing, "other", hold), true})
	time.Sleep(300*time.Millisecond - time.Since(start))
	expect(t, c,
		step{acq(longer, "other", hold), false}, // outlived its original 150ms
		step{acq(shorter, "other", hold), true}, // gone after 50ms
		step{rel(longer, "v"), true},
	)
}

func testExpiry(t *testing.T, s *suite) {
	k := keyspace(t)("k")
	c := s.client(t)
	expect(t, c, step{acq(k, "v1", 50*time.Millisecond), true}, step{acq(k, "v2", hold), false})
	time.Sleep(120 * time.Millisecond)
	expect(t, c,
		step{ext(k, "v1", hold), false}, // an expired lock cannot be revived
		step{rel(k, "v1"), false},
		step{acq(k, "v2", hold), true},
	)
}

// testFenced checks AcquireFenced and RaiseFence: the counter grows by one
// with every grant and only then, RaiseFence never lowers it and confirms a
// token only above the count or equal to a count its value owns (AcquireFenced
// and a confirmed RaiseFence take ownership), and the counter outlives the
// lock.
func testFenced(t *testing.T, s *suite) {
	ks := keyspace(t)
	k, raised, short := ks("k"), ks("raised"), ks("short")
	c, other := s.client(t), s.client(t)

	// grant runs one AcquireFenced that must set the key, and returns its
	// token; deny one that must find the key held.
	grant := func(cl transport.Transport, key, value string, ttl time.Duration) int64 {
		t.Helper()
		op := fenced(key, value, ttl)
		r := do(t, cl, op)[0]
		if r.Err != nil || !r.OK || r.Token < 1 {
			t.Fatalf("%s: OK=%v Token=%d Err=%v, want OK=true, Token>=1, Err=nil", describe(op), r.OK, r.Token, r.Err)
		}
		return r.Token
	}
	deny := func(cl transport.Transport, key, value string) {
		t.Helper()
		op := fenced(key, value, hold)
		if r := do(t, cl, op)[0]; r.Err != nil || r.OK || r.Token != 0 {
			t.Errorf("%s on a held key: OK=%v Token=%d Err=%v, want OK=false, Token=0, Err=nil", describe(op), r.OK, r.Token, r.Err)
		}
	}
	wantToken := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: Token=%d, want %d", what, got, want)
		}
	}

	t1 := grant(c, k, "v1", hold)
	// A fenced lock is a lock like any other: both kinds of Acquire, from
	// either client, find it held, and its value releases and extends it.
	deny(other, k, "v2")
	deny(c, k, "v1")
	expect(t, other,
		step{acq(k, "v2", hold), false},
		step{ext(k, "v2", hold), false},
		step{ext(k, "v1", hold), true},
		step{rel(k, "v2"), false},
		step{rel(k, "v1"), true},
	)
	// The denied AcquireFenceds left the counter alone.
	wantToken("the grant after two denied ones", grant(other, k, "v3", hold), t1+1)
	// RaiseFence above the count is confirmed, and leaves the lock alone.
	expect(t, c,
		step{raise(k, t1+10, "v3"), true},
		step{acq(k, "v4", hold), false},
		step{rel(k, "v3"), true},
	)
	wantToken("the grant after RaiseFence(t1+10)", grant(c, k, "v5", hold), t1+11)
	// AcquireFenced made v5 the owner of t1+11: v5's write-back of it is
	// confirmed (also twice, also after the lock is gone), anyone else's is
	// refused and takes nothing over, and a token below the count is
	// refused even to its owner. None of it moves the count, and neither
	// does a plain Acquire.
	expect(t, c,
		step{rel(k, "v5"), true},
		step{raise(k, t1+11, "v5"), true},
		step{raise(k, t1+11, "v5"), true},
		step{raise(k, t1+11, "v4"), false},
		step{raise(k, t1+11, "v5"), true},
		step{raise(k, t1+10, "v5"), false},
		step{raise(k, 1, "v4"), false},
		step{acq(k, "v6", hold), true},
		step{raise(k, t1+11, "v6"), false},
		step{rel(k, "v6"), true},
	)
	wantToken("the grant after refused RaiseFences and a plain Acquire", grant(c, k, "v7", hold), t1+12)
	// A new grant takes ownership from the previous one.
	expect(t, other, step{raise(k, t1+12, "v5"), false}, step{raise(k, t1+12, "v7"), true})
	expect(t, c, step{rel(k, "v7"), true})

	// Within a batch, grants count in slice order.
	ops := []transport.Op{fenced(k, "b1", hold), rel(k, "b1"), fenced(k, "b2", hold), fenced(k, "b3", hold), rel(k, "b2")}
	want := []struct {
		ok    bool
		token int64
	}{{true, t1 + 13}, {true, 0}, {true, t1 + 14}, {false, 0}, {true, 0}}
	for i, r := range do(t, c, ops...) {
		if r.Err != nil || r.OK != want[i].ok || (ops[i].Kind == transport.AcquireFenced && r.Token != want[i].token) {
			t.Errorf("op %d %s: OK=%v Token=%d Err=%v, want OK=%v Token=%d", i, describe(ops[i]), r.OK, r.Token, r.Err, want[i].ok, want[i].token)
		}
	}

	// RaiseFence of a key that never had a counter creates it, owned by
	// the raise's value; a confirmed raise above the count takes ownership
	// from the grant that owned it.
	expect(t, other,
		step{raise(raised, 5, "r"), true},
		step{raise(raised, 5, "r"), true},
		step{raise(raised, 5, "x"), false},
		step{raise(raised, 4, "r"), false},
	)
	wantToken("the first grant after RaiseFence(5) of a new key", grant(c, raised, "v", hold), 6)
	expect(t, other,
		step{raise(raised, 6, "r"), false},
		step{raise(raised, 7, "r"), true},
		step{raise(raised, 6, "v"), false},
		step{raise(raised, 7, "v"), false},
		step{raise(raised, 7, "r"), true},
	)
	expect(t, c, step{rel(raised, "v"), true})
	wantToken("the grant after RaiseFence(7)", grant(c, raised, "w", hold), 8)
	expect(t, c, step{rel(raised, "w"), true})

	// The lock expires with its ttl; the counter does not.
	ts := grant(c, short, "v", 50*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	expect(t, c, step{acq(short, "other", hold), true}, step{rel(short, "other"), true})
	wantToken("the grant after the previous fenced lock expired", grant(c, short, "w", hold), ts+1)
	expect(t, c, step{rel(short, "w"), true})
}

// testFenceOverlap runs FenceOverlap with the five masters played by five
// keys of this one master, each through a client of its own.
func testFenceOverlap(t *testing.T, s *suite) {
	ks := keyspace(t)
	var (
		masters []transport.Transport
		keys    []string
	)
	for _, m := range []string{"A", "B", "C", "D", "E"} {
		masters = append(masters, s.client(t))
		keys = append(keys, ks(m))
	}
	FenceOverlap(t, masters, keys)
}

// testMulti checks the atomic multi-key forms of Acquire, Release and
// Extend: all or nothing for Acquire and Extend, each key on its own for
// Release.
func testMulti(t *testing.T, s *suite) {
	// The checks of expiry need the steps before them done within a TTL
	// of the keys' grant: on a loaded machine (and under the race
	// detector) a few round trips may take longer than 150ms, and keys
	// that expired under a slow test are no finding. Such a run is
	// discarded and run again on fresh keys with the TTLs doubled.
	for short, long := 150*time.Millisecond, 2*time.Second; ; short, long = 2*short, 2*long {
		bad, slow := multiRound(t, s, short, long)
		if slow == "" || short >= 5*time.Second {
			for _, m := range bad {
				t.Error(m)
			}
			if slow != "" {
				t.Errorf("still %s", slow)
			}
			return
		}
		t.Logf("%s: again with TTLs %v and %v", slow, 2*short, 2*long)
	}
}

// multiRound is one run of testMulti with keys of TTL short and extensions
// to long. It returns the mismatches of the expiry-dependent part, and
// slow, when not empty, says that part outran a TTL, and how.
func multiRound(t *testing.T, s *suite, short, long time.Duration) (bad []string, slow string) {
	ks := keyspace(t)
	a, b, c, d, e, f, g, h := ks("a"), ks("b"), ks("c"), ks("d"), ks("e"), ks("f"), ks("g"), ks("h")
	abc := []string{a, b, c}
	cl, other := s.client(t), s.client(t)

	start := time.Now()
	bad = append(bad, mismatches(t, cl,
		step{multi(transport.Acquire, abc, "v", short), true},
		step{multi(transport.Acquire, []string{d, c}, "w", hold), false}, // c is held
		step{multi(transport.Acquire, abc, "v", hold), false},            // not re-entrant
		step{multi(transport.Acquire, []string{e, f}, "v", short), true},
		step{multi(transport.Acquire, []string{g, h}, "v", hold), true},
	)...)
	// The failed Acquire set nothing, not even the free d; the successful
	// ones set every key.
	bad = append(bad, mismatches(t, other,
		step{acq(d, "w", hold), true},
		step{rel(d, "w"), true},
		step{acq(a, "x", hold), false},
		step{acq(b, "x", hold), false},
		step{acq(c, "x", hold), false},
		step{acq(e, "x", hold), false},
		step{acq(f, "x", hold), false},
	)...)
	bad = append(bad, mismatches(t, cl,
		step{multi(transport.Extend, abc, "other", hold), false},
		step{multi(transport.Extend, abc, "v", long), true},
		step{multi(transport.Extend, []string{e, f}, "other", hold), false},
		step{rel(f, "v"), true},
		// f is gone, so these extend nothing: not e, whichever place the
		// missing key has, and they do not re-create f.
		step{multi(transport.Extend, []string{e, f}, "v", hold), false},
		step{multi(transport.Extend, []string{f, e}, "v", hold), false},
	)...)
	// Every op so far ran after start and before now: if now is within
	// short of start, no key of TTL short had expired yet.
	if took := time.Since(start); took >= short {
		return bad, fmt.Sprintf("the steps before the keys' %v TTL took %v", short, took)
	}
	expect(t, other, step{acq(f, "probe", hold), true}, step{rel(f, "probe"), true})
	// A Release with the wrong value deletes nothing; with the right one,
	// everything.
	expect(t, cl,
		step{multi(transport.Release, []string{g, h}, "other", 0), false},
		step{acq(g, "x", hold), false},
		step{acq(h, "x", hold), false},
		step{multi(transport.Release, []string{g, h}, "v", 0), true},
		step{acq(g, "x", hold), true},
		step{acq(h, "x", hold), true},
		step{rel(g, "x"), true},
		step{rel(h, "x"), true},
	)

	time.Sleep(2*short - time.Since(start))
	bad = append(bad, mismatches(t, other,
		// The successful Extend covered every key: all outlived short.
		step{acq(a, "x", hold), false},
		step{acq(b, "x", hold), false},
		step{acq(c, "x", hold), false},
		// The failed ones extended nothing: e expired after short.
		step{acq(e, "x", hold), true},
		step{rel(e, "x"), true},
	)...)
	// The extension to long ran after start.
	if took := time.Since(start); took >= long {
		return bad, fmt.Sprintf("the steps before the extension's %v TTL took %v", long, took)
	}

	expect(t, cl,
		step{rel(b, "v"), true},
		step{multi(transport.Extend, abc, "v", hold), false},
	)
	expect(t, other, step{acq(b, "probe", hold), true}, step{rel(b, "probe"), true}) // not re-created
	// Release is per key: not OK, since b is gone, but a and c are deleted.
	expect(t, cl, step{multi(transport.Release, abc, "v", 0), false})
	expect(t, other,
		step{acq(a, "x", hold), true},
		step{acq(c, "x", hold), true},
		step{rel(a, "x"), true},
		step{rel(c, "x"), true},
	)
	return bad, ""
}

func testOrder(t *testing.T, s *suite) {
	c := s.client(t)
	t.Run("fixed", func(t *testing.T) {
		k := keyspace(t)("k")
		expect(t, c,
			step{acq(k, "v1", hold), true},
			step{rel(k, "v1"), true},
			step{acq(k, "v2", hold), true},
			step{ext(k, "v1", hold), false},
			step{rel(k, "v1"), false},
			step{acq(k, "v3", hold), false},
		)
	})
	t.Run("random", func(t *testing.T) {
		seed := mrand.Uint64()
		t.Logf("seed %d", seed)
		rng := mrand.New(mrand.NewPCG(seed, seed))
		ks := keyspace(t)
		keys := make([]string, 100)
		for i := range keys {
			keys[i] = ks(fmt.Sprint(i))
		}
		m := model.New()
		ops := randomOps(rng, keys, 1000, s.caps)
		for i, r := range do(t, c, ops...) {
			if err := m.Check(ops[i], r); err != nil {
				t.Fatalf("op %d %s: %v (seed %d)", i, describe(ops[i]), err, seed)
			}
		}
		expect(t, c, verify(m, keys)...)
	})
}

func testConcurrentDo(t *testing.T, s *suite) {
	const workers, rounds, keysPer, batch = 16, 20, 5, 50
	c := s.client(t)
	ks := keyspace(t)
	ctx, cancel := context.WithTimeout(t.Context(), hold)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), mrand.Uint64()))
			keys := make([]string, keysPer)
			for i := range keys {
				keys[i] = ks(fmt.Sprintf("w%d-%d", w, i))
			}
			// Batches differ from worker to worker and round to round, so
			// results delivered to the wrong caller would not match.
			m := model.New()
			for r := range rounds {
				ops := randomOps(rng, keys, batch, s.caps)
				res := make([]transport.Result, len(ops))
				if err := c.Do(ctx, ops, res); err != nil {
					t.Errorf("worker %d round %d: batch error: %v", w, r, err)
					return
				}
				for i, got := range res {
					if err := m.Check(ops[i], got); err != nil {
						t.Errorf("worker %d round %d op %d %s: %v", w, r, i, describe(ops[i]), err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// watched is a context that counts the calls made on it after the Do it was
// given to had returned.
type watched struct {
	context.Context
	returned atomic.Bool
	late     atomic.Int32
}

func (w *watched) note() {
	if w.returned.Load() {
		w.late.Add(1)
	}
}

func (w *watched) Deadline() (time.Time, bool) { w.note(); return w.Context.Deadline() }
func (w *watched) Done() <-chan struct{}       { w.note(); return w.Context.Done() }
func (w *watched) Err() error                  { w.note(); return w.Context.Err() }
func (w *watched) Value(k any) any             { w.note(); return w.Context.Value(k) }

// testCtxNotKept: Do must not use a ctx that is not done after it returns,
// because the engine reuses such a context for its next batch.
func testCtxNotKept(t *testing.T, s *suite) {
	c := s.client(t)
	ks := keyspace(t)
	base, cancel := context.WithTimeout(t.Context(), hold)
	defer cancel()
	ctxs := make([]*watched, 20)
	for i := range ctxs {
		ctxs[i] = &watched{Context: base}
		k := ks(fmt.Sprint(i))
		ops := []transport.Op{acq(k, "v", hold), ext(k, "v", hold), rel(k, "v")}
		res := make([]transport.Result, len(ops))
		err := c.Do(ctxs[i], ops, res)
		ctxs[i].returned.Store(true)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	time.Sleep(50 * time.Millisecond) // time for a straggler to show itself
	for i, w := range ctxs {
		if n := w.late.Load(); n > 0 {
			t.Errorf("batch %d: its ctx was used %d times after Do returned, though it was not done", i, n)
		}
	}
}

func testErrors(t *testing.T, s *suite) {
	c := s.client(t)
	// Malformed ops answer ErrInvalidOp whatever the transport declares:
	// Check (or CheckFor) comes before the question of support.
	t.Run("invalid ops", func(t *testing.T) {
		ks := keyspace(t)
		k, k2, valid, raised, after := ks("k"), ks("k2"), ks("valid"), ks("raised"), ks("after")
		invalid := []struct {
			name string
			op   transport.Op
		}{
			{"kind 0", transport.Op{Key: k, Value: "v", TTL: hold}},
			{"unknown kind", transport.Op{Kind: 99, Key: k, Value: "v", TTL: hold}},
			{"acquire empty key", acq("", "v", hold)},
			{"acquire empty value", acq(k, "", hold)},
			{"acquire ttl 0", acq(k, "v", 0)},
			{"acquire ttl 999us", acq(k, "v", 999*time.Microsecond)},
			{"acquire negative ttl", acq(k, "v", -time.Second)},
			{"release empty key", rel("", "v")},
			{"release empty value", rel(k, "")},
			{"extend empty value", ext(k, "", hold)},
			{"extend ttl 1us", ext(k, "v", time.Microsecond)},
			{"acquire-fenced empty key", fenced("", "v", hold)},
			{"acquire-fenced empty value", fenced(k, "", hold)},
			{"acquire-fenced ttl 0", fenced(k, "v", 0)},
			{"acquire-fenced ttl 1500us", fenced(k, "v", 1500*time.Microsecond)},
			{"acquire-fenced with Keys", transport.Op{Kind: transport.AcquireFenced, Key: k, Keys: []string{k}, Value: "v", TTL: hold}},
			{"raise-fence token 0", raise(k, 0, "v")},
			{"raise-fence negative token", raise(k, -1, "v")},
			{"raise-fence empty key", raise("", 1, "v")},
			{"raise-fence empty value", raise(k, 1, "")},
			{"raise-fence with Keys", transport.Op{Kind: transport.RaiseFence, Key: k, Keys: []string{k}, Value: "v", Token: 1}},
			{"multi acquire Key is not Keys[0]", transport.Op{Kind: transport.Acquire, Key: k, Keys: []string{k2, k}, Value: "v", TTL: hold}},
			{"multi acquire empty Key", transport.Op{Kind: transport.Acquire, Keys: []string{k, k2}, Value: "v", TTL: hold}},
			{"multi acquire empty key among Keys", multi(transport.Acquire, []string{k, "", k2}, "v", hold)},
			{"multi acquire ttl 0", multi(transport.Acquire, []string{k, k2}, "v", 0)},
			{"multi release Key is not Keys[0]", transport.Op{Kind: transport.Release, Key: k, Keys: []string{k2}, Value: "v"}},
			{"multi release empty value", multi(transport.Release, []string{k, k2}, "", 0)},
			{"multi extend empty value", multi(transport.Extend, []string{k, k2}, "", hold)},
		}
		// Valid ops around the invalid ones must be applied normally; the
		// final Acquires of k and k2 show that no invalid op touched them.
		ops := []transport.Op{acq(valid, "v", hold)}
		for _, in := range invalid {
			ops = append(ops, in.op)
		}
		ops = append(ops, rel(valid, "v"), acq(k, "w", hold), rel(k, "w"), acq(k2, "w", hold), rel(k2, "w"))
		if s.caps.Has(transport.Fencing) {
			ops = append(ops, raise(raised, 1, "v"), fenced(raised, "v", hold), rel(raised, "v"))
		}
		ops = append(ops, acq(after, "v", hold))
		res := do(t, c, ops...)
		for i, in := range invalid {
			if r := res[1+i]; r.OK || !errors.Is(r.Err, transport.ErrInvalidOp) {
				t.Errorf("%s: OK=%v Err=%v, want OK=false and Err wrapping ErrInvalidOp", in.name, r.OK, r.Err)
			}
		}
		for i := len(invalid) + 1; i < len(ops); i++ {
			if r := res[i]; r.Err != nil || !r.OK {
				t.Errorf("valid op %d %s in a batch with invalid ops: OK=%v Err=%v, want OK=true", i, describe(ops[i]), r.OK, r.Err)
			}
		}
	})
	t.Run("done context", func(t *testing.T) {
		canceled, cancel := context.WithCancel(t.Context())
		cancel()
		expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel2()
		for _, tc := range []struct {
			name string
			ctx  context.Context
		}{{"canceled", canceled}, {"deadline exceeded", expired}} {
			t.Run(tc.name, func(t *testing.T) {
				k := keyspace(t)("k")
				ops := []transport.Op{acq(k, "v", hold), ext(k, "v", hold), rel(k, "v")}
				// Stale values show whether Do really set every result.
				res := []transport.Result{{OK: true}, {OK: true}, {OK: true}}
				if err := c.Do(tc.ctx, ops, res); err == nil {
					t.Error("Do with a done ctx returned nil, want an error")
				}
				for i, r := range res {
					if r.Err == nil {
						t.Errorf("op %d %s: Err=nil after a done ctx, want an error", i, describe(ops[i]))
					}
				}
				// A done ctx fails one batch, not the client.
				expect(t, c, step{acq(keyspace(t)("after"), "v", hold), true})
			})
		}
	})
	t.Run("empty batch", func(t *testing.T) {
		if err := c.Do(t.Context(), nil, nil); err != nil {
			t.Errorf("Do(nil, nil) = %v, want nil", err)
		}
		if err := c.Do(t.Context(), []transport.Op{}, []transport.Result{}); err != nil {
			t.Errorf("Do(empty, empty) = %v, want nil", err)
		}
	})
}

// testUnsupported: a transport answers every op that needs a capability it
// does not declare with an Err wrapping errors.ErrUnsupported, OK false,
// and applies none of it; the batch's other ops go through. (The engine
// never sends such ops; this makes a transport that silently half-applies
// them visible.)
func testUnsupported(t *testing.T, s *suite) {
	lacking := transport.Known &^ s.caps
	if lacking == 0 {
		t.Skipf("the transport declares every capability (%v): no op is unsupported", s.caps)
	}
	ks := keyspace(t)
	c := s.client(t)
	var (
		ops   []transport.Op
		after []step // run afterwards: they pass only if no unsupported op was applied
	)
	if lacking.Has(transport.Fencing) {
		f := ks("fenced")
		ops = append(ops, fenced(f, "v", hold), raise(ks("raised"), 1, "v"))
		after = append(after, step{acq(f, "w", hold), true}, step{rel(f, "w"), true})
	}
	if lacking.Has(transport.MultiKey) {
		a, b, e1, e2, r1, r2 := ks("a"), ks("b"), ks("e1"), ks("e2"), ks("r1"), ks("r2")
		expect(t, c, step{acq(r1, "v", hold), true}, step{acq(r2, "v", hold), true})
		ops = append(ops,
			multi(transport.Acquire, []string{a, b}, "v", hold),
			multi(transport.Extend, []string{e1, e2}, "v", hold),
			multi(transport.Release, []string{r1, r2}, "v", 0))
		after = append(after,
			step{acq(a, "w", hold), true}, step{acq(b, "w", hold), true},
			step{rel(a, "w"), true}, step{rel(b, "w"), true},
			step{acq(e1, "w", hold), true}, step{rel(e1, "w"), true}, // not created
			step{acq(r1, "w", hold), false}, step{acq(r2, "w", hold), false}, // not released
			step{rel(r1, "v"), true}, step{rel(r2, "v"), true})
	}
	if lacking.Has(transport.Shared) {
		r, w := ks("reader"), ks("writer")
		ops = append(ops, racq(r, "v", hold), wacq(w, "v", hold), rext(ks("ext"), "v", hold), rrel(ks("rel"), "v"))
		after = append(after,
			step{acq(r, "w", hold), true}, step{rel(r, "w"), true}, // no reader was admitted
			step{acq(w, "w", hold), true}, step{rel(w, "w"), true}) // no writer either
	}
	// Supported ops around the unsupported ones are applied as usual.
	valid := ks("valid")
	n := len(ops)
	ops = append([]transport.Op{acq(valid, "v", hold)}, append(ops, rel(valid, "v"))...)
	res := do(t, c, ops...)
	for i := 1; i <= n; i++ {
		if r := res[i]; r.OK || !errors.Is(r.Err, errors.ErrUnsupported) {
			t.Errorf("%s on a transport without the %s capability: OK=%v Err=%v, want OK=false and Err wrapping errors.ErrUnsupported (transport.CheckFor answers it)",
				describe(ops[i]), transport.Needs(&ops[i]), r.OK, r.Err)
		}
	}
	for _, i := range []int{0, n + 1} {
		if r := res[i]; r.Err != nil || !r.OK {
			t.Errorf("valid op %d %s in a batch with unsupported ops: OK=%v Err=%v, want OK=true", i, describe(ops[i]), r.OK, r.Err)
		}
	}
	expect(t, c, after...)
}

// testClose requires the first Close of a healthy client to return nil; a
// second Close may return nil or any error, but must not panic.
func testClose(t *testing.T, s *suite) {
	ks := keyspace(t)
	k, k2 := ks("k"), ks("k2")
	c, other := s.client(t), s.client(t)
	expect(t, c, step{acq(k, "v", hold), true})
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	ops := []transport.Op{acq(k2, "v", hold), rel(k, "v")}
	res := []transport.Result{{OK: true}, {OK: true}}
	if err := c.Do(t.Context(), ops, res); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Do after Close = %v, want an error wrapping ErrClosed", err)
	}
	for i, r := range res {
		if !errors.Is(r.Err, transport.ErrClosed) {
			t.Errorf("op %d %s after Close: OK=%v Err=%v, want Err wrapping ErrClosed", i, describe(ops[i]), r.OK, r.Err)
		}
	}
	if err := c.Close(); err != nil {
		t.Logf("second Close = %v (accepted: only a panic fails)", err)
	}
	// Closing a client drops the client, not its keys, and leaves other
	// clients of the master working.
	expect(t, other, step{rel(k, "v"), true})
}

func testOptional(t *testing.T, s *suite) {
	c, other := s.client(t), s.client(t)
	t.Run("Capabler", func(t *testing.T) {
		// The engine reads one client's capabilities for the master.
		if a, b := transport.CapabilitiesOf(c), transport.CapabilitiesOf(other); a != s.caps || b != s.caps {
			t.Errorf("clients of one master declare capabilities %v, %v and %v, want the same", s.caps, a, b)
		}
		if unknown := s.caps &^ transport.Known; unknown != 0 {
			t.Errorf("Capabilities() = %v declares bits this version does not define (%#x)", s.caps, uint32(unknown))
		}
	})
	t.Run("ServerReporter", func(t *testing.T) {
		sr, ok := c.(transport.ServerReporter)
		if !ok {
			t.Skip("client does not implement transport.ServerReporter: the engine cannot quarantine its master after a restart")
		}
		sr2, ok := other.(transport.ServerReporter)
		if !ok {
			t.Fatal("one client implements transport.ServerReporter, another does not")
		}
		e, e2 := sr.Epoch(), sr2.Epoch()
		info, err := sr.ServerInfo(t.Context())
		if err != nil {
			t.Fatalf("ServerInfo: %v", err)
		}
		if info.RunID == "" || info.Uptime < 0 {
			t.Errorf("ServerInfo = %+v, want a non-empty RunID and Uptime >= 0", info)
		}
		// The engine tells a restart by a changed run id, so two clients of
		// one running master must agree on it.
		info2, err := sr2.ServerInfo(t.Context())
		if err != nil {
			t.Fatalf("ServerInfo on a second client: %v", err)
		}
		if info2.RunID != info.RunID {
			t.Errorf("two clients of one master report run ids %q and %q, want the same", info.RunID, info2.RunID)
		}
		// Restarts are for each transport's own tests to provoke; here the
		// master keeps running, so the epoch must not move, whatever the
		// clients do.
		k := keyspace(t)("k")
		for i := range 5 {
			expect(t, c, step{acq(k, "v", hold), true}, step{ext(k, "v", hold), true})
			expect(t, other, step{acq(k, "w", hold), false}, step{rel(k, "v"), true})
			if _, err := sr.ServerInfo(t.Context()); err != nil {
				t.Fatalf("ServerInfo: %v", err)
			}
			if got, got2 := sr.Epoch(), sr2.Epoch(); got != e || got2 != e2 {
				t.Fatalf("round %d: epochs went from %d and %d to %d and %d on a master that did not restart, want them unchanged",
					i, e, e2, got, got2)
			}
		}
	})
	t.Run("Immediate", func(t *testing.T) {
		if !transport.IsImmediate(c) {
			t.Skip("client is no transport.Immediate that says true: the engine runs its batches on I/O goroutines, as it must for any transport that can wait")
		}
		if !transport.IsImmediate(other) {
			t.Fatal("one client of the master says it is immediate, another does not")
		}
		// In a synctest bubble the clock moves only while every goroutine
		// of the bubble waits on it: a Do that sleeps, or waits for a
		// timer, comes back later than it started. A wait on I/O does not
		// move it and is not caught here; a transport that does I/O must
		// not say it is immediate at all.
		k := keyspace(t)
		ops := []transport.Op{acq(k("a"), "v", time.Second), ext(k("a"), "v", time.Second), rel(k("a"), "v"), acq(k("b"), "v", time.Second)}
		// One Do outside the bubble first: what a transport makes on its
		// first Do (a timer, a goroutine) must not belong to the bubble.
		// Inside it, a Do that polls the clock until it moves would spin
		// forever, and a wait on a channel made outside goes unseen.
		_ = c.Do(context.Background(), ops, make([]transport.Result, len(ops)))
		var took time.Duration
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			_ = c.Do(context.Background(), ops, make([]transport.Result, len(ops)))
			took = time.Since(start)
		})
		if took != 0 {
			t.Errorf("Do waited %v on the clock (a sleep or a timer), but the transport says it is immediate: "+
				"the engine runs an immediate transport's Do on a caller's goroutine, which must never wait; "+
				"drop Immediate, or forward it only from a transport that adds no wait", took)
		}
	})
	t.Run("Namer", func(t *testing.T) {
		n, ok := c.(transport.Namer)
		if !ok {
			t.Skip("client does not implement transport.Namer")
		}
		if n.Name() == "" {
			t.Error(`Name() = "", want a name`)
		}
	})
}

// verify returns steps that pass only if the master holds exactly what m
// holds for keys, and that leave those keys free.
func verify(m model.Model, keys []string) []step {
	var steps []step
	for _, k := range keys {
		if v, held := m.Held[k]; held {
			steps = append(steps, step{acq(k, "probe", hold), false}, step{rel(k, v), true})
		} else {
			steps = append(steps, step{acq(k, "probe", hold), true}, step{rel(k, "probe"), true})
		}
	}
	return steps
}

// randomOps returns n ops over keys with few distinct values, so that
// acquires collide, and releases and extends hit both the holder and others.
// Three in four are single-key Acquire, Release and Extend; the rest are
// fenced ops and multi-key ops over two or three distinct keys, as far as
// caps allows (else more single-key ones).
func randomOps(rng *mrand.Rand, keys []string, n int, caps transport.Capabilities) []transport.Op {
	values := [...]string{"a", "b", "c"}
	ops := make([]transport.Op, n)
	for i := range ops {
		k, v := keys[rng.IntN(len(keys))], values[rng.IntN(len(values))]
		r := rng.IntN(12)
		if (r == 9 || r == 10) && !caps.Has(transport.Fencing) || r == 11 && !caps.Has(transport.MultiKey) {
			r = rng.IntN(9)
		}
		switch {
		case r < 3:
			ops[i] = acq(k, v, hold)
		case r < 6:
			ops[i] = rel(k, v)
		case r < 9:
			ops[i] = ext(k, v, hold)
		case r == 9:
			ops[i] = fenced(k, v, hold)
		case r == 10:
			ops[i] = raise(k, int64(1+rng.IntN(6)), v)
		default:
			perm := rng.Perm(len(keys))[:min(2+rng.IntN(2), len(keys))]
			mk := make([]string, len(perm))
			for j, p := range perm {
				mk[j] = keys[p]
			}
			kind := [...]transport.OpKind{transport.Acquire, transport.Release, transport.Extend}[rng.IntN(3)]
			ops[i] = multi(kind, mk, v, hold)
		}
	}
	return ops
}
