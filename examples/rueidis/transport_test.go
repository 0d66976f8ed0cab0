package rueidistransport

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/transporttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newTransport(t testing.TB, cfg Config) *Transport {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// TestConformance runs the engine's conformance suite, which every transport
// must pass, against a real redis-server.
func TestConformance(t *testing.T) {
	s := startRedis(t)
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		tr, err := New(Config{Addr: s.Addr})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
}

const hold = 10 * time.Second

func acq(k, v string) transport.Op {
	return transport.Op{Kind: transport.Acquire, Key: k, Value: v, TTL: hold}
}

func rel(k, v string) transport.Op { return transport.Op{Kind: transport.Release, Key: k, Value: v} }

// do runs ops as one batch that must not fail as a whole.
func do(t *testing.T, tr *Transport, ops ...transport.Op) []transport.Result {
	t.Helper()
	res := make([]transport.Result, len(ops))
	if err := tr.Do(t.Context(), ops, res); err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res
}

func wantOK(t *testing.T, what string, r transport.Result, ok bool) {
	t.Helper()
	if r.Err != nil || r.OK != ok {
		t.Errorf("%s: OK=%v Err=%v, want OK=%v and no error", what, r.OK, r.Err, ok)
	}
}

// TestNoScriptKeepsOrder: after SCRIPT FLUSH, an op that met NOSCRIPT is sent
// again only if no later op of its batch that ran touches its key. Resending
// the release below after the SET of the same key would delete a key the
// batch did not release.
func TestNoScriptKeepsOrder(t *testing.T) {
	s := startRedis(t)
	tr := newTransport(t, Config{Addr: s.Addr})
	do(t, tr, acq("k", "v"), acq("k2", "v2"))

	s.do("SCRIPT", "FLUSH")
	res := do(t, tr, rel("k", "v"), acq("k", "v"), rel("k2", "v2"))
	if !errors.Is(res[0].Err, errNotResent) {
		t.Errorf("release of k before a SET of k, after NOSCRIPT: OK=%v Err=%v, want the not-resent error", res[0].OK, res[0].Err)
	}
	wantOK(t, "SET NX of the held k", res[1], false)
	wantOK(t, "release of k2 (no later op on k2), resent", res[2], true)
	// k was not released: its holder still can.
	wantOK(t, "release of k after the batch", do(t, tr, rel("k", "v"))[0], true)

	// A fencing counter goes by its lock's key: a RaiseFence that met
	// NOSCRIPT is not resent after a later op of that key ran.
	s.do("SCRIPT", "FLUSH")
	s.do("SCRIPT", "LOAD", releaseScript)
	res = do(t, tr, transport.Op{Kind: transport.RaiseFence, Key: "f", Value: "x", Token: 7}, rel("f", "nobody"))
	if res[0].Err == nil {
		t.Errorf("raise-fence before a release of its key, after NOSCRIPT: OK=%v, want the not-resent error", res[0].OK)
	}
	wantOK(t, "release of the free key f", res[1], false)
	// The counter is still 0, so token 1 is above it.
	wantOK(t, "raise-fence to 1", do(t, tr, transport.Op{Kind: transport.RaiseFence, Key: "f", Value: "y", Token: 1})[0], true)
}

// TestPausedMaster: a Do to a master that does not answer returns once its
// ctx is done, with an error on every op, and not OK. The SET it abandoned
// is still applied when the master wakes up, before anything sent later:
// "no answer" means "maybe applied", and the connection keeps its order.
func TestPausedMaster(t *testing.T) {
	s := startRedis(t)
	// OpTimeout does not help here: every ctx below ends first.
	tr := newTransport(t, Config{Addr: s.Addr, OpTimeout: time.Hour})
	do(t, tr, acq("warm", "v"))
	s.pause()
	defer s.resume()

	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
		key  string
	}{
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			trigger, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
			context.AfterFunc(trigger, cancel)
			return ctx, func() { stop(); cancel() }
		}, context.Canceled, "k2"},
		// A deadline long enough for the SET to be queued before it passes,
		// even on a loaded machine: the check after SIGCONT relies on it.
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), time.Second)
		}, context.DeadlineExceeded, "k1"},
	} {
		ctx, cancel := c.ctx()
		defer cancel()
		res := []transport.Result{{OK: true}}
		done := make(chan error, 1)
		go func() { done <- tr.Do(ctx, []transport.Op{acq(c.key, "v")}, res) }()
		select {
		case err := <-done:
			if !errors.Is(err, c.want) || res[0].OK || !errors.Is(res[0].Err, c.want) {
				t.Errorf("%s: Do = %v, result OK=%v Err=%v; want errors wrapping %v and OK false", c.name, err, res[0].OK, res[0].Err, c.want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: Do still running a minute after its ctx ended", c.name)
		}
	}
	s.resume()
	// k1's SET went out before Do gave up, so the master applies it before
	// this batch (k2's may or may not have been written: no check).
	res := do(t, tr, acq("k1", "w"), rel("k1", "v"))
	wantOK(t, "SET NX of k1 after the abandoned SET", res[0], false)
	wantOK(t, "release of k1 by the abandoned SET's value", res[1], true)
}

// TestRestart: a master that restarted (new process, no keys) is seen
// through a new epoch and a new run id; and until the transport reconnects,
// ops fail with errors rather than answering "no".
func TestRestart(t *testing.T) {
	s := startRedis(t)
	tr := newTransport(t, Config{Addr: s.Addr})
	id := runID(t, tr)
	do(t, tr, acq("k", "v"))
	e := tr.Epoch()
	s.restart()

	// The first calls may meet the dead connection; a later one dials.
	var res []transport.Result
	for attempt := 1; ; attempt++ {
		res = make([]transport.Result, 1)
		_ = tr.Do(t.Context(), []transport.Op{acq("k", "w")}, res)
		if res[0].Err == nil {
			break
		}
		if !errors.Is(res[0].Err, transport.ErrUnavailable) {
			t.Logf("attempt %d: %v", attempt, res[0].Err)
		}
		if attempt == 100 {
			t.Fatalf("no answer after a restart in 100 attempts: %v", res[0].Err)
		}
	}
	wantOK(t, "SET NX of k on the restarted master (it lost k)", res[0], true)
	if tr.Epoch() == e {
		t.Errorf("epoch still %d after the master restarted, want a new one", e)
	}
	if id2 := runID(t, tr); id2 == id {
		t.Errorf("run id %q unchanged after a restart", id)
	}
}

func runID(t *testing.T, tr *Transport) string {
	t.Helper()
	info, err := tr.ServerInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.RunID
}

// TestMasterDown: New succeeds with nothing listening, and calls fail fast
// with ErrUnavailable.
func TestMasterDown(t *testing.T) {
	tr := newTransport(t, Config{Addr: freeAddr(t)})
	res := []transport.Result{{OK: true}, {OK: true}}
	err := tr.Do(t.Context(), []transport.Op{acq("k", "v"), rel("k", "v")}, res)
	if !errors.Is(err, transport.ErrUnavailable) {
		t.Errorf("Do with the master down = %v, want ErrUnavailable", err)
	}
	for i, r := range res {
		if r.OK || !errors.Is(r.Err, transport.ErrUnavailable) {
			t.Errorf("op %d: OK=%v Err=%v, want ErrUnavailable", i, r.OK, r.Err)
		}
	}
	if _, err := tr.ServerInfo(t.Context()); !errors.Is(err, transport.ErrUnavailable) {
		t.Errorf("ServerInfo with the master down = %v, want ErrUnavailable", err)
	}
}

func TestNewBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Addr: "localhost"},
		{Addr: "127.0.0.1:"},
		{Addr: "127.0.0.1:6379", DB: -1},
		{Addr: "127.0.0.1:6379", DialTimeout: -time.Second},
		{Addr: "127.0.0.1:6379", OpTimeout: -time.Second},
		{Addr: "127.0.0.1:6379", MaxFlushDelay: -time.Second},
	} {
		tr, err := New(cfg)
		var ae *api.Error
		if tr != nil || !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &ae) {
			t.Errorf("New(%+v) = %v, %v; want nil and an *api.Error wrapping ErrInvalidArgument", cfg, tr, err)
		}
	}
}

func TestParseServerInfo(t *testing.T) {
	info, err := parseServerInfo("m", "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\nuptime_in_seconds:10\r\n")
	if err != nil || info.RunID != "abc" || info.Uptime != 9*time.Second {
		t.Errorf("parse = %+v, %v; want run id abc and 9s (a second under the reported 10)", info, err)
	}
	info, err = parseServerInfo("m", "run_id:abc\r\nuptime_in_seconds:10\r\nmaxmemory:100\r\nmaxmemory_policy:volatile-lru\r\nrole:slave\r\nmaster_host:h\r\nmaster_port:7\r\n")
	if err != nil || info.ReplicaOf != "h:7" || info.Eviction != "maxmemory-policy volatile-lru" {
		t.Errorf("parse = %+v, %v; want a replica of h:7 that evicts under volatile-lru", info, err)
	}
	info, err = parseServerInfo("m", "run_id:abc\r\nuptime_in_seconds:10\r\n# Stats\r\nevicted_keys:17\r\n")
	if err != nil || info.Evicted != 17 {
		t.Errorf("parse = %+v, %v; want 17 keys evicted", info, err)
	}
	for _, text := range []string{"run_id:abc\r\n", "uptime_in_seconds:3\r\n", "run_id:abc\r\nuptime_in_seconds:x\r\n", "run_id:abc\r\nuptime_in_seconds:3\r\nevicted_keys:x\r\n"} {
		if _, err := parseServerInfo("m", text); err == nil {
			t.Errorf("parse(%q) = nil error, want one", text)
		}
	}
}

// newEngine starts an engine over this transport to the masters at addrs,
// closed when tb ends.
func newEngine(tb testing.TB, addrs []string) *engine.Engine {
	tb.Helper()
	ts := make([]transport.Transport, len(addrs))
	for i, addr := range addrs {
		ts[i] = newTransport(tb, Config{Addr: addr, OpTimeout: api.DefaultOptions().MasterTimeout})
	}
	// Fresh masters have nothing to forget: no restart quarantine.
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close() })
	return e
}

// TestEngine drives the engine over three masters through this transport:
// a plain lock, fenced ones and a multi-key one.
func TestEngine(t *testing.T) {
	e := newEngine(t, []string{startRedis(t).Addr, startRedis(t).Addr, startRedis(t).Addr})
	must := func(lk api.Lock, err error) api.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, api.ErrNotAcquired) {
			t.Errorf("%s = %v, want ErrNotAcquired", what, err)
		}
	}
	ctx := t.Context()
	lk := must(e.TryLock(ctx, "job"))
	_, err := e.TryLock(ctx, "job")
	refused("second TryLock of a held key", err)
	must(nil, lk.Unlock(ctx))

	var last int64
	for range 3 {
		lk := must(e.TryLock(ctx, "fenced", api.WithFencing(true)))
		if lk.Token() <= last {
			t.Errorf("fencing token %d after %d, want it to grow", lk.Token(), last)
		}
		last = lk.Token()
		must(nil, lk.Unlock(ctx))
	}

	all := must(e.TryLockAll(ctx, []string{"a", "b"}))
	_, err = e.TryLock(ctx, "b")
	refused("TryLock of a key held by TryLockAll", err)
	must(nil, all.Unlock(ctx))
}

// A master's error reply is marked as one (transport.ErrReply), for an op
// and for INFO, so that the engine says the master refused the command
// rather than that it did not answer, and keeps a master that refuses INFO
// counted as reachable. An ACL user without SET and scripting, and one
// without INFO, get error replies; a master that is down does not.
func TestErrorRepliesMarked(t *testing.T) {
	s := startRedis(t)
	s.do("ACL", "SETUSER", "noset", "on", ">pw", "~*", "+@all", "-set", "-@scripting")
	s.do("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info")

	tr := newTransport(t, Config{Addr: s.Addr, Username: "noset", Password: "pw"})
	r := do(t, tr, acq("k", "v"))[0]
	if !errors.Is(r.Err, transport.ErrReply) {
		t.Errorf("acquire by a user without SET: %v, want an error marked transport.ErrReply", r.Err)
	}

	tr = newTransport(t, Config{Addr: s.Addr, Username: "noinfo", Password: "pw"})
	if _, err := tr.ServerInfo(t.Context()); !errors.Is(err, transport.ErrReply) {
		t.Errorf("INFO by a user without INFO: %v, want an error marked transport.ErrReply", err)
	}

	tr = newTransport(t, Config{Addr: freeAddr(t), DialTimeout: 200 * time.Millisecond})
	if _, err := tr.ServerInfo(t.Context()); err == nil || errors.Is(err, transport.ErrReply) {
		t.Errorf("INFO from a master that is down: %v, want an error not marked transport.ErrReply", err)
	}
}
