package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/transporttest"
)

// The two scripts' SHAs, named for the tests that check them on the wire.
var (
	releaseSHA = scripts[scriptRelease].sha
	extendSHA  = scripts[scriptExtend].sha
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dial connects to addr and closes the transport when t ends.
func dial(t testing.TB, cfg Config) *Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("Dial(%s): %v", cfg.Addr, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
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

// do runs one batch with a generous deadline and returns its results and
// batch error.
func do(tr transport.Transport, ops ...transport.Op) ([]transport.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res := make([]transport.Result, len(ops))
	err := tr.Do(ctx, ops, res)
	return res, err
}

// mustDo runs a batch that must succeed and checks each op's OK.
func mustDo(t *testing.T, tr transport.Transport, ops []transport.Op, want ...bool) {
	t.Helper()
	res, err := do(tr, ops...)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	for i, r := range res {
		if r.Err != nil || r.OK != want[i] {
			t.Errorf("op %d %s %s: OK=%v Err=%v, want OK=%v", i, ops[i].Kind, ops[i].Key, r.OK, r.Err, want[i])
		}
	}
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		// A poll interval: callers wait for a real server to come back,
		// which the transport reports as no event of its own.
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConformance(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		return dial(t, Config{Addr: s.Addr})
	})
}

func TestDeadMasterFailsFastThenReconnects(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	s.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := Dial(ctx, Config{Addr: s.Addr}); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("Dial to a dead master: %v, want ErrUnavailable", err)
	}

	// A reconnection backoff of 2-6s: a Do that waited for the next dial
	// instead of failing would take over a second after the first attempt
	// failed, which no scheduling delay explains.
	const backoff = 4 * time.Second
	tr, err := New(Config{Addr: s.Addr, ReconnectInitial: backoff, ReconnectMax: backoff})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	<-tr.firstDone // the first dial failed: the loop is in its backoff wait
	for range 10 {
		start := time.Now()
		res, err := do(tr, acq("k", "v", time.Second), rel("k", "v"))
		if d := time.Since(start); d > backoff/4 {
			t.Errorf("Do on a dead master took %v, want it to fail fast", d)
		}
		if !errors.Is(err, transport.ErrUnavailable) {
			t.Fatalf("Do on a dead master: %v, want ErrUnavailable", err)
		}
		for i, r := range res {
			if !errors.Is(r.Err, transport.ErrUnavailable) || r.OK {
				t.Fatalf("op %d on a dead master: %+v, want Err wrapping ErrUnavailable", i, r)
			}
		}
	}
	if err := tr.Ping(ctx); !errors.Is(err, transport.ErrUnavailable) {
		t.Errorf("Ping on a dead master: %v", err)
	}
	if _, err := tr.ServerInfo(ctx); !errors.Is(err, transport.ErrUnavailable) {
		t.Errorf("ServerInfo on a dead master: %v", err)
	}
	// The reason is the dial error, not just "unavailable".
	if _, err := do(tr, acq("k", "v", time.Second)); !strings.Contains(err.Error(), "refused") {
		t.Errorf("error %q does not say why the master is unavailable", err)
	}

	s.Restart(t)
	eventually(t, 3*backoff, func() error {
		_, err := do(tr, acq("k", "v", time.Second))
		return err
	})
	if v, _ := s.Get(t, "k"); v != "v" {
		t.Errorf("after reconnecting, k = %q, want v", v)
	}
}

func TestKillWhileConnected(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("k", "v", time.Minute)}, true)
	info, err := tr.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	s.Kill()
	res, err := do(tr, rel("k", "v"), acq("k2", "v", time.Minute))
	if err == nil {
		t.Fatal("Do on a killed master succeeded")
	}
	for i, r := range res {
		if r.Err == nil || r.OK {
			t.Errorf("op %d on a killed master: %+v, want an error", i, r)
		}
	}

	s.Restart(t)
	eventually(t, 5*time.Second, func() error {
		_, err := do(tr, acq("k", "v2", time.Minute))
		return err
	})
	// The restarted master is empty, and the engine can tell it restarted.
	if v, _ := s.Get(t, "k"); v != "v2" {
		t.Errorf("k = %q, want v2 (the restarted master had forgotten v)", v)
	}
	info2, err := tr.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info2.RunID == info.RunID {
		t.Errorf("run id %q did not change across a restart", info.RunID)
	}
	if n := tr.connects.Load(); n != 2 {
		t.Errorf("%d connections made, want 2", n)
	}
}

func TestNoScript(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("a", "va", time.Minute), acq("b", "vb", time.Minute), acq("c", "vc", time.Minute)},
		true, true, true)

	s.Do(t, nil, "SCRIPT", "FLUSH")
	mustDo(t, tr, []transport.Op{
		ext("a", "va", 2*time.Minute),
		acq("d", "vd", time.Minute),
		rel("b", "vb"),
		rel("c", "wrong"),
		ext("c", "wrong", time.Minute),
	}, true, true, true, false, false)
	if ms := s.PTTL(t, "a"); ms < 90_000 {
		t.Errorf("a's ttl is %dms after Extend to 2m", ms)
	}
	if _, ok := s.Get(t, "b"); ok {
		t.Error("b survived its Release")
	}

	// Only one script flushed and only release ops: just that one is
	// reloaded, and nothing else in the batch is sent twice.
	s.Do(t, nil, "SCRIPT", "FLUSH")
	mustDo(t, tr, []transport.Op{acq("e", "ve", time.Minute), rel("a", "va"), acq("e", "other", time.Minute)},
		true, true, false)
	var exists []int
	s.Do(t, &exists, "SCRIPT", "EXISTS", releaseSHA, extendSHA)
	if len(exists) != 2 || exists[0] != 1 || exists[1] != 0 {
		t.Errorf("SCRIPT EXISTS release, extend = %v, want [1 0]", exists)
	}
}

// TestNoScriptKeepsBatchOrder: ops in one batch apply in slice order even
// when a script in it meets NOSCRIPT. The shape that matters is the one the
// engine sends when a Lock call retries with its value: the cleanup
// Release(k, v) of one attempt and the Acquire(k, v) of the next in one
// batch. Resending the release after the whole first pass would run SET,
// then DEL: an Acquire reported OK over a key that is gone (a phantom
// vote). Whatever the transport does, an Acquire it reports OK must leave
// the key holding its value, and a Release it reports OK must not undo a
// later Acquire.
func TestNoScriptKeepsBatchOrder(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	for i := range 20 {
		k := fmt.Sprintf("order-%d", i)
		if i%2 == 1 {
			// The previous attempt's SET did land: the release must
			// delete it before the acquire runs.
			mustDo(t, tr, []transport.Op{acq(k, "v", time.Minute)}, true)
		}
		s.Do(t, nil, "SCRIPT", "FLUSH")
		ops := []transport.Op{rel(k, "v"), acq(k, "v", time.Minute)}
		res, err := do(tr, ops...)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		v, held := s.Get(t, k)
		if res[1].OK && (!held || v != "v") {
			t.Errorf("batch %d: Acquire reported OK (release: %+v), but the key is %q (exists=%v): a phantom grant", i, res[0], v, held)
		}
		if res[1].Err == nil && !res[1].OK && !held {
			t.Errorf("batch %d: Acquire reported a definite no, but the key is free", i)
		}
		if i%2 == 1 && (res[0].Err == nil || !errors.Is(res[0].Err, errNotResent)) {
			t.Errorf("batch %d: the release that could not be resent in order reported %+v, want errNotResent", i, res[0])
		}
	}
	// The release was not resent, but its script was loaded for the next
	// batches all the same.
	if got := scriptsLoaded(t, s); got[scriptRelease] != '1' {
		t.Errorf("SCRIPT EXISTS after a batch whose release was not resent = %s, want the release script loaded", got)
	}
	// A later op in the batch that ran on another key does not stop the
	// resend: the ops of other keys commute with it.
	mustDo(t, tr, []transport.Op{acq("x", "v", time.Minute)}, true)
	s.Do(t, nil, "SCRIPT", "FLUSH")
	mustDo(t, tr, []transport.Op{rel("x", "v"), acq("y", "v", time.Minute)}, true, true)
	if _, ok := s.Get(t, "x"); ok {
		t.Error("x survived a Release resent after NOSCRIPT")
	}
}

func TestScriptsLoadedOnConnect(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	dial(t, Config{Addr: s.Addr})
	if got := scriptsLoaded(t, s); got != strings.Repeat("1", int(numScripts)) {
		t.Errorf("SCRIPT EXISTS of every script after connect = %s, want all 1", got)
	}
}

// scriptsLoaded returns SCRIPT EXISTS of every script, in scriptID order, as
// a string of 0s and 1s.
func scriptsLoaded(t *testing.T, s *redistest.Server) string {
	t.Helper()
	args := make([]string, 0, numScripts+1)
	args = append(args, "EXISTS")
	for _, sc := range scripts {
		args = append(args, sc.sha)
	}
	var exists []int
	s.Do(t, &exists, "SCRIPT", args...)
	return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(exists)), ""), "[]")
}

func fenced(key, value string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.AcquireFenced, Key: key, Value: value, TTL: ttl}
}

func raise(key string, token int64, owner string) transport.Op {
	return transport.Op{Kind: transport.RaiseFence, Key: key, Value: owner, Token: token}
}

// counter returns the fencing counter of key on s as "n/owner", or "" if
// there is none.
func counter(t *testing.T, s *redistest.Server, key string) string {
	t.Helper()
	var h map[string]string
	s.Do(t, &h, "HGETALL", transport.FenceKey(key))
	if len(h) == 0 {
		return ""
	}
	return h["n"] + "/" + h["o"]
}

func multi(kind transport.OpKind, value string, ttl time.Duration, keys ...string) transport.Op {
	return transport.Op{Kind: kind, Key: keys[0], Keys: keys, Value: value, TTL: ttl}
}

// TestNoScriptNewOps: after SCRIPT FLUSH, fenced and multi-key ops are
// resent after loading just the scripts they need, with their own replies
// (tokens included) intact.
func TestNoScriptNewOps(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{fenced("f", "v", time.Minute), multi(transport.Acquire, "v", time.Minute, "a", "b")}, true, true)

	s.Do(t, nil, "SCRIPT", "FLUSH")
	ops := []transport.Op{
		fenced("f", "w", time.Minute), // held: no
		rel("f", "v"),
		fenced("f", "w", time.Minute), // token 2
		acq("plain", "v", time.Minute),
		raise("f", 10, "w"),
		multi(transport.Extend, "v", 2*time.Minute, "a", "b"),
		multi(transport.Acquire, "v", time.Minute, "c", "d"),
		multi(transport.Release, "v", 0, "c", "d"),
	}
	res, err := do(tr, ops...)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []transport.Result{{}, {OK: true}, {OK: true, Token: 2}, {OK: true}, {OK: true}, {OK: true}, {OK: true}, {OK: true}} {
		if res[i] != want {
			t.Errorf("op %d %s: %+v, want %+v", i, ops[i].Kind, res[i], want)
		}
	}
	if ms := s.PTTL(t, "b"); ms < 90_000 {
		t.Errorf("b's ttl is %dms after a multi Extend to 2m", ms)
	}
	if c := counter(t, s, "f"); c != "10/w" {
		t.Errorf("counter = %q, want 10 owned by w", c)
	}
	// Every script but ExtendScript was needed (the single-key Release
	// needs ReleaseScript), and only those were loaded.
	if got := scriptsLoaded(t, s); got != "1011111000000" {
		t.Errorf("SCRIPT EXISTS after the resend = %s, want 1011111000000", got)
	}

	s.Do(t, nil, "SCRIPT", "FLUSH")
	mustDo(t, tr, []transport.Op{multi(transport.Release, "v", 0, "a", "b")}, true)
	if got := scriptsLoaded(t, s); got != "0000010000000" {
		t.Errorf("SCRIPT EXISTS after resending a multi Release = %s, want only the multi release script", got)
	}
}

// TestFenceOverlap runs issue 9's schedule, in which lock 2's token would
// come out below lock 1's, on five real masters.
func TestFenceOverlap(t *testing.T) {
	var masters []transport.Transport
	for _, s := range redistest.Start(t, 5) {
		masters = append(masters, dial(t, Config{Addr: s.Addr}))
	}
	transporttest.FenceOverlap(t, masters, []string{"k", "k", "k", "k", "k"})
}

// TestFencedOnTheWire checks what AcquireFenced and RaiseFence leave on the
// master, and that a broken counter is an error, never a plain "no".
func TestFencedOnTheWire(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	res, err := do(tr, fenced("k", "token-1", 30*time.Second))
	if err != nil || !res[0].OK || res[0].Token != 1 {
		t.Fatalf("AcquireFenced: %v %+v", err, res[0])
	}
	if v, _ := s.Get(t, "k"); v != "token-1" {
		t.Errorf("GET k = %q", v)
	}
	if ms := s.PTTL(t, "k"); ms <= 29_000 || ms > 30_000 {
		t.Errorf("PTTL k = %d, want about 30000", ms)
	}
	fk := transport.FenceKey("k")
	if fk != "redlock-fence:k" {
		t.Fatalf("FenceKey(k) = %q", fk)
	}
	// The counter is a hash: the count "n" and its owner "o", the value of
	// the grant that set it.
	if c := counter(t, s, "k"); c != "1/token-1" {
		t.Errorf("counter %s = %q, want 1 owned by token-1", fk, c)
	}
	if ms := s.PTTL(t, fk); ms != -1 {
		t.Errorf("PTTL %s = %d, want -1: a counter never expires", fk, ms)
	}
	// A denied AcquireFenced changes nothing.
	mustDo(t, tr, []transport.Op{fenced("k", "other", time.Minute), rel("k", "token-1")}, false, true)
	if c := counter(t, s, "k"); c != "1/token-1" {
		t.Errorf("counter after a denied AcquireFenced = %q, want 1 owned by token-1", c)
	}
	// RaiseFence sets count and owner, without expiry, and never lowers.
	mustDo(t, tr, []transport.Op{raise("k", 1<<40, "r"), raise("k", 7, "r"), raise("k", 1<<40, "x"), raise("k", 1<<40, "r")}, true, false, false, true)
	if c := counter(t, s, "k"); c != "1099511627776/r" {
		t.Errorf("counter after RaiseFence(2^40, r), then refused ones = %q", c)
	}
	if ms := s.PTTL(t, fk); ms != -1 {
		t.Errorf("PTTL %s after RaiseFence = %d, want -1", fk, ms)
	}
	res, _ = do(tr, fenced("k", "v", time.Minute), rel("k", "v"))
	if res[0].Token != 1<<40+1 {
		t.Errorf("token after RaiseFence(2^40) = %d", res[0].Token)
	}
	// Other clients' plain EVAL of the scripts work like ours.
	var n int64
	s.Do(t, &n, "EVAL", AcquireFencedScript, "2", "k", fk, "x", "60000")
	if n != 1<<40+2 {
		t.Errorf("plain EVAL of AcquireFencedScript = %d", n)
	}
	s.Do(t, nil, "DEL", "k")

	// A counter an earlier version left as a plain integer becomes the hash
	// with the same count and no owner: no lock owns it, so an equal token
	// is refused and a larger one confirmed.
	s.Do(t, nil, "SET", transport.FenceKey("old"), "41")
	mustDo(t, tr, []transport.Op{raise("old", 41, "x")}, false)
	if c := counter(t, s, "old"); c != "41/" {
		t.Errorf("string counter 41 after a refused RaiseFence = %q, want the hash 41 with no owner", c)
	}
	s.Do(t, nil, "SET", transport.FenceKey("old"), "41")
	res, _ = do(tr, fenced("old", "v", time.Minute), rel("old", "v"), raise("old", 42, "v"))
	if !res[0].OK || res[0].Token != 42 || !res[2].OK {
		t.Errorf("fenced ops on the string counter 41: %+v, want token 42 and its write-back confirmed", res)
	}
	if c := counter(t, s, "old"); c != "42/v" {
		t.Errorf("string counter 41 after a grant = %q, want 42 owned by v", c)
	}

	// A counter that is not a number: the SET happened, the INCR failed,
	// so the op fails with the error (and the engine cleans up).
	s.Do(t, nil, "SET", transport.FenceKey("bad"), "not-a-number")
	res, err = do(tr, fenced("bad", "v", time.Minute), raise("bad", 3, "v"), acq("after", "v", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].OK || res[0].Err == nil || res[1].OK || res[1].Err == nil || !res[2].OK {
		t.Errorf("fenced ops on a non-numeric counter: %+v, want errors for the first two only", res)
	}
	if _, ok := s.Get(t, "bad"); !ok {
		t.Error("the lock key was not set: the test does not show what it means to")
	}
	// A negative counter makes INCR return <= 0: the key is set, so that
	// must be an error too, not "held by someone else".
	s.Do(t, nil, "SET", transport.FenceKey("neg"), "-5")
	res, _ = do(tr, fenced("neg", "v", time.Minute))
	if res[0].OK || !errors.Is(res[0].Err, errBadToken) {
		t.Errorf("AcquireFenced with a negative counter: %+v, want errBadToken", res[0])
	}
	// The connection is fine after all this.
	mustDo(t, tr, []transport.Op{acq("c", "v", time.Minute)}, true)
	if n := tr.connects.Load(); n != 1 {
		t.Errorf("%d connections made, want 1", n)
	}
}

func TestMultiOnTheWire(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{multi(transport.Acquire, "v", 30*time.Second, "a", "b", "c")}, true)
	for _, k := range []string{"a", "b", "c"} {
		if v, _ := s.Get(t, k); v != "v" {
			t.Errorf("GET %s = %q", k, v)
		}
		if ms := s.PTTL(t, k); ms <= 29_000 || ms > 30_000 {
			t.Errorf("PTTL %s = %d, want about 30000", k, ms)
		}
	}
	// A key of another type counts as existing for Acquire, and makes
	// Release and Extend fail with the error Redis gives.
	s.Do(t, nil, "HSET", "hash", "f", "v")
	res, err := do(tr,
		multi(transport.Acquire, "v", time.Minute, "d", "hash"),
		multi(transport.Extend, "v", time.Minute, "a", "hash"),
		multi(transport.Release, "v", 0, "hash", "a"),
		acq("d", "v", time.Minute),
	)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].OK || res[0].Err != nil || res[1].OK || res[1].Err == nil || res[2].OK || res[2].Err == nil || !res[3].OK {
		t.Errorf("multi ops over a hash: %+v", res)
	}
	// A one-key multi op is the single-key op, plain SET included.
	mustDo(t, tr, []transport.Op{multi(transport.Acquire, "v", time.Minute, "one"), multi(transport.Release, "v", 0, "one")}, true, true)
	// Our SHA1s are what Redis computes for the scripts.
	for _, sc := range scripts {
		var sha string
		s.Do(t, &sha, "SCRIPT", "LOAD", sc.src)
		if sha != sc.sha {
			t.Errorf("sha %s, redis says %s", sc.sha, sha)
		}
	}
}

// TestEpoch: the epoch counts connections, and a batch served by a new
// connection is followed by a new epoch, whose ServerInfo is the new
// process's.
func TestEpoch(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	s.Kill()
	tr, err := New(Config{Addr: s.Addr, ReconnectInitial: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	<-tr.firstDone // the first connection attempt failed
	if e := tr.Epoch(); e != 0 {
		t.Errorf("Epoch before any connection = %d, want 0", e)
	}
	s.Restart(t)
	eventually(t, 5*time.Second, func() error {
		_, err := do(tr, acq("k", "v", time.Hour))
		return err
	})
	e1 := tr.Epoch()
	if e1 == 0 {
		t.Fatal("Epoch is still 0 after a batch succeeded")
	}
	info1, err := tr.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		mustDo(t, tr, []transport.Op{acq("k", "w", time.Hour)}, false)
		if _, err := tr.ServerInfo(context.Background()); err != nil {
			t.Fatal(err)
		}
		if e := tr.Epoch(); e != e1 {
			t.Fatalf("epoch moved from %d to %d without a reconnect", e1, e)
		}
	}

	s.Kill()
	s.Restart(t)
	// Every batch that gets through after the restart ran on a new
	// connection, so it must read a new epoch after Do: it finds k gone.
	eventually(t, 5*time.Second, func() error {
		res, err := do(tr, acq("k", "v2", time.Hour))
		if err != nil {
			return err
		}
		if e := tr.Epoch(); e == e1 {
			t.Fatalf("a batch succeeded after the restart (OK=%v: k forgotten) but the epoch is still %d", res[0].OK, e)
		}
		if !res[0].OK {
			t.Errorf("k survived a restart without persistence")
		}
		return nil
	})
	e2 := tr.Epoch()
	info2, err := tr.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info2.RunID == info1.RunID {
		t.Errorf("ServerInfo after epoch %d (was %d) still shows run id %s", e2, e1, info1.RunID)
	}
	if e := tr.Epoch(); e != e2 || e2 != e1+1 {
		t.Errorf("epochs %d, %d, %d: want one step per reconnect", e1, e2, e)
	}
	if got := uint64(tr.connects.Load()); got != e2 {
		t.Errorf("epoch %d after %d connections", e2, got)
	}
}

func TestPausedMaster(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	// Bounds relative to what a batch would otherwise wait for: a batch
	// that ignored its 50ms deadline would return at OpTimeout (2s), one
	// without a deadline that ignored OpTimeout never; a loaded machine's
	// delays fit well inside either gap.
	const opTimeout = 2 * time.Second
	tr := dial(t, Config{Addr: s.Addr, OpTimeout: opTimeout})
	mustDo(t, tr, []transport.Op{acq("k", "v", time.Minute)}, true)

	s.Pause()
	paused := true
	defer func() {
		if paused {
			s.Resume()
		}
	}()
	// Several batches in a row: after the first, radix's reader waits for a
	// reply that does not come, and later batches queue behind it.
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		res := make([]transport.Result, 2)
		start := time.Now()
		err := tr.Do(ctx, []transport.Op{acq("k2", "v", time.Minute), rel("k", "v")}, res)
		d := time.Since(start)
		cancel()
		if d > opTimeout/2 {
			t.Errorf("batch %d on a paused master returned after %v, want ~50ms", i, d)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("batch %d: %v, want DeadlineExceeded", i, err)
		}
		for j, r := range res {
			if !errors.Is(r.Err, context.DeadlineExceeded) {
				t.Errorf("batch %d op %d: %+v, want Err wrapping DeadlineExceeded", i, j, r)
			}
		}
	}
	// Without a deadline of its own, a batch gets OpTimeout.
	start := time.Now()
	res := make([]transport.Result, 1)
	if err := tr.Do(context.Background(), []transport.Op{acq("k3", "v", time.Minute)}, res); err == nil {
		t.Error("Do without a deadline on a paused master succeeded")
	}
	if d := time.Since(start); d < opTimeout || d > 2*opTimeout {
		t.Errorf("Do without a deadline returned after %v, want OpTimeout (%v)", d, opTimeout)
	}
	if err := tr.Ping(ctxTimeout(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping on a paused master: %v", err)
	}

	s.Resume()
	paused = false
	// The same connection works again: a deadline does not break it.
	eventually(t, 5*time.Second, func() error {
		_, err := do(tr, acq("k4", "v", time.Minute))
		return err
	})
	mustDo(t, tr, []transport.Op{acq("k5", "v", time.Minute), rel("k5", "v")}, true, true)
	if n := tr.connects.Load(); n != 1 {
		t.Errorf("%d connections made, want 1: a deadline must not tear the connection down", n)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestCloseWhilePaused(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr, err := Dial(context.Background(), Config{Addr: s.Addr})
	if err != nil {
		t.Fatal(err)
	}
	s.Pause()
	defer s.Resume()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res := make([]transport.Result, 1)
			_ = tr.Do(ctx, []transport.Op{acq("k", "v", time.Minute)}, res)
		})
	}
	// Not an order the result depends on: a batch not yet sent at Close
	// fails with ErrClosed just as promptly; the pause only lets most of
	// them reach the paused server first (the transport has no "sent" event
	// to wait for, and a stopped server cannot be asked).
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	tr.Close()
	wg.Wait()
	// A Close that waited for the stuck batches would take their 5s.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close with batches stuck on a paused master took %v", d)
	}
	res := make([]transport.Result, 1)
	if err := tr.Do(context.Background(), []transport.Op{acq("k", "v", time.Minute)}, res); !errors.Is(err, transport.ErrClosed) ||
		!errors.Is(res[0].Err, transport.ErrClosed) {
		t.Errorf("Do after Close: %v %+v", err, res[0])
	}
	if err := tr.Ping(context.Background()); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Ping after Close: %v", err)
	}
	if _, err := tr.ServerInfo(context.Background()); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("ServerInfo after Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseWhileReconnecting(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	s.Kill()
	tr, err := New(Config{Addr: s.Addr, ReconnectInitial: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	<-tr.firstDone // the first dial failed: the loop waits out a backoff of an hour
	start := time.Now()
	tr.Close()
	// A Close that waited for the backoff would take half an hour at least.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close during a backoff wait took %v", d)
	}
}

func TestPerOpErrorIsolation(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	s.Do(t, nil, "HSET", "hash", "f", "v")
	s.Do(t, nil, "RPUSH", "list", "x")
	ops := []transport.Op{
		acq("a", "va", time.Minute),
		rel("hash", "v"),
		acq("hash", "v", time.Minute), // SET NX sees the key exists: a plain no
		ext("list", "v", time.Minute),
		acq("b", "vb", time.Minute),
		rel("a", "va"),
		{Kind: transport.Release, Key: "", Value: "v"}, // invalid: not sent
		ext("b", "vb", 2*time.Minute),
		multi(transport.Extend, "v", time.Minute, "list", "hash"),
	}
	res, err := do(tr, ops...)
	if err != nil {
		t.Fatalf("batch error %v, want per-op errors only", err)
	}
	for i, want := range []struct {
		ok      bool
		errLike string
	}{
		// The standard release and extend scripts meet WRONGTYPE at their
		// GET, before any write: a definite "no" (the key holds no lock
		// value; a key of read-write readers is such a key). A multi-key
		// script may fail after writing, so its WRONGTYPE stays an error.
		{true, ""}, {false, ""}, {false, ""}, {false, ""},
		{true, ""}, {true, ""}, {false, "invalid op"}, {true, ""},
		{false, "WRONGTYPE"},
	} {
		r := res[i]
		switch {
		case want.errLike == "" && (r.Err != nil || r.OK != want.ok):
			t.Errorf("op %d %s %s: %+v, want OK=%v", i, ops[i].Kind, ops[i].Key, r, want.ok)
		case want.errLike != "" && (r.OK || r.Err == nil || !strings.Contains(r.Err.Error(), want.errLike)):
			t.Errorf("op %d %s %s: %+v, want an error like %q", i, ops[i].Kind, ops[i].Key, r, want.errLike)
		}
	}
	if !errors.Is(res[6].Err, transport.ErrInvalidOp) {
		t.Errorf("invalid op: %v, want ErrInvalidOp", res[6].Err)
	}
	if !strings.Contains(res[8].Err.Error(), s.Addr) {
		t.Errorf("per-op error %q does not name the master", res[8].Err)
	}
	// The connection is still fine.
	mustDo(t, tr, []transport.Op{acq("c", "vc", time.Minute)}, true)
	if n := tr.connects.Load(); n != 1 {
		t.Errorf("%d connections made, want 1", n)
	}
}

func TestWireCompatibility(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})

	mustDo(t, tr, []transport.Op{acq("k", "token-1", 30*time.Second)}, true)
	if v, ok := s.Get(t, "k"); !ok || v != "token-1" {
		t.Fatalf("plain GET k = %q %v, want token-1", v, ok)
	}
	if ms := s.PTTL(t, "k"); ms <= 29_000 || ms > 30_000 {
		t.Errorf("PTTL k = %d, want about 30000", ms)
	}
	// Another Redlock client releases our key with plain EVAL of the
	// standard script.
	var n int
	s.Do(t, &n, "EVAL", ReleaseScript, "1", "k", "token-1")
	if n != 1 {
		t.Fatalf("plain EVAL release = %d, want 1", n)
	}
	// And we release and extend keys set by another client.
	s.Do(t, nil, "SET", "k2", "token-2", "NX", "PX", "30000")
	s.Do(t, nil, "SET", "k3", "token-3", "NX", "PX", "30000")
	mustDo(t, tr, []transport.Op{ext("k2", "token-2", time.Minute), rel("k3", "token-3")}, true, true)
	if ms := s.PTTL(t, "k2"); ms <= 59_000 {
		t.Errorf("PTTL k2 = %d after Extend to 1m", ms)
	}
	// Our SHA1s are what any client computes for the standard scripts.
	var sha string
	s.Do(t, &sha, "SCRIPT", "LOAD", ReleaseScript)
	if sha != releaseSHA {
		t.Errorf("release sha %s, redis says %s", releaseSHA, sha)
	}
	s.Do(t, &sha, "SCRIPT", "LOAD", ExtendScript)
	if sha != extendSHA {
		t.Errorf("extend sha %s, redis says %s", extendSHA, sha)
	}
}

func TestAuthAndSelect(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	s.Do(t, nil, "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "+@all")

	tr := dial(t, Config{Addr: "redis://alice:s3cret@" + s.Addr + "/3"})
	mustDo(t, tr, []transport.Op{acq("k", "v", time.Minute)}, true)
	if _, ok := s.Get(t, "k"); ok {
		t.Error("k landed in db 0, want db 3")
	}
	ctx := ctxTimeout(t, 5*time.Second)
	c, err := (radix.Dialer{SelectDB: "3"}).Dial(ctx, "tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var v string
	if err := c.Do(ctx, radix.Cmd(&v, "GET", "k")); err != nil || v != "v" {
		t.Errorf("GET k in db 3 = %q %v", v, err)
	}

	_, err = Dial(ctx, Config{Addr: "redis://alice:wrong@" + s.Addr})
	if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("Dial with a wrong password: %v, want ErrUnavailable saying WRONGPASS", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong@") {
		t.Errorf("error leaks the password: %v", err)
	}
}

// TestTLS connects through a TLS-terminating proxy in front of redis-server,
// which checks our TLS settings (ServerName, roots) without needing a TLS
// build of redis.
func TestTLS(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	cert, pool := redistest.SelfSigned(t, "redis.test")
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { l.Close() })
	var (
		connsMu sync.Mutex
		conns   []net.Conn
	)
	t.Cleanup(func() {
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", s.Addr)
			if err != nil {
				c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, up)
			connsMu.Unlock()
			wg.Go(func() { io.Copy(up, c); up.Close() })
			wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
	addr := "rediss://" + l.Addr().String()

	tr := dial(t, Config{Addr: addr, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "redis.test"}})
	mustDo(t, tr, []transport.Op{acq("k", "v", time.Minute), rel("k", "v")}, true, true)
	tr.Close()

	// The certificate names redis.test, not 127.0.0.1: with ServerName
	// defaulting to the address's host, verification must fail.
	ctx := ctxTimeout(t, 5*time.Second)
	if _, err := Dial(ctx, Config{Addr: addr, TLSConfig: &tls.Config{RootCAs: pool}}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("Dial with a mismatched ServerName: %v, want a certificate error", err)
	}
	// Plain TCP to a TLS port does not get through either.
	if _, err := Dial(ctx, Config{Addr: l.Addr().String(), DialTimeout: 200 * time.Millisecond}); err == nil {
		t.Error("plain Dial to a TLS listener succeeded")
	}
}

// A rediss:// address of a plain (non-TLS) port: redis-server takes the
// TLS ClientHello for the start of an inline command and waits for its
// end, so the handshake never completes. The error must say what likely
// went wrong, not only that a deadline passed.
func TestTLSToPlainPort(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	// The dial's own timeout ends the handshake, or Dial's ctx ends
	// first (redlock status gives both the same --timeout).
	for _, c := range []struct {
		name        string
		ctx, dialTO time.Duration
	}{{"dial-timeout", 5 * time.Second, 300 * time.Millisecond}, {"dial-ctx", 300 * time.Millisecond, 5 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxTimeout(t, c.ctx)
			start := time.Now()
			_, err := Dial(ctx, Config{Addr: "rediss://" + s.Addr, DialTimeout: c.dialTO})
			if err == nil {
				t.Fatal("a TLS Dial to a plain redis-server succeeded")
			}
			if !errors.Is(err, transport.ErrUnavailable) {
				t.Errorf("Dial: %v, want it to wrap ErrUnavailable", err)
			}
			for _, want := range []string{"TLS handshake with " + s.Addr + " did not complete", "is the server listening for TLS?", "redis:// for a plain port"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Dial with rediss:// to a plain port, after %v: %v\nwant it to say %q", time.Since(start).Round(time.Millisecond), err, want)
				}
			}
			t.Log(err)
		})
	}
}

func TestNameAndMismatchedLengths(t *testing.T) {
	tr, err := New(Config{Addr: "redis://localhost:1/2"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Name() != "localhost:1" {
		t.Errorf("Name = %q", tr.Name())
	}
	res := make([]transport.Result, 1)
	err = tr.Do(context.Background(), []transport.Op{acq("a", "v", time.Second), acq("b", "v", time.Second)}, res)
	if !errors.Is(err, transport.ErrInvalidOp) || !errors.Is(res[0].Err, transport.ErrInvalidOp) {
		t.Errorf("Do with fewer results than ops: %v %+v", err, res[0])
	}
}

// TestConcurrentBatchesAcrossReconnects runs batches from many goroutines
// while the master is killed and restarted: no batch may hang, report OK
// without an answer, or race.
func TestConcurrentBatchesAcrossReconnects(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Each phase below waits until every goroutine has seen it: a batch
	// answered before the kill, one failed after it, and one answered
	// after the restart.
	const workers = 8
	type phase struct {
		ok    bool // what the phase waits for: an answer or a failure
		once  [workers]sync.Once
		reach [workers]chan struct{}
	}
	var cur atomic.Pointer[phase]
	await := func(ok bool, what string) {
		t.Helper()
		p := &phase{ok: ok}
		for g := range p.reach {
			p.reach[g] = make(chan struct{})
		}
		cur.Store(p)
		for g, ch := range p.reach {
			select {
			case <-ch:
			case <-time.After(30 * time.Second):
				t.Fatalf("goroutine %d: no batch %s within 30s", g, what)
			}
		}
	}
	for g := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("g%d-%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				res := make([]transport.Result, 2)
				err := tr.Do(ctx, []transport.Op{acq(k, "v", time.Minute), rel(k, "v")}, res)
				cancel()
				if p := cur.Load(); p != nil && p.ok == (err == nil) {
					p.once[g].Do(func() { close(p.reach[g]) })
				}
				if err == nil {
					if !res[0].OK || !res[1].OK {
						t.Errorf("fresh key %s: %+v", k, res)
					}
				} else {
					// A retry pause, not an order: a dead master fails
					// batches at once, and a loop without it would only
					// burn the CPU the reconnection needs.
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	await(true, "answered before the kill")
	s.Kill()
	await(false, "failed after the kill")
	s.Restart(t)
	await(true, "answered after the restart")
}
