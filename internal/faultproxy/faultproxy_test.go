package faultproxy

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup starts a redis-server, a proxy in front of it and a Redis transport
// that talks to the server through the proxy.
func setup(t *testing.T) (*redistest.Server, *Proxy, *redis.Transport) {
	t.Helper()
	srv := redistest.Start(t, 1)[0]
	p, err := New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr, err := redis.Dial(ctx, redis.Config{Addr: p.Addr(), ReconnectInitial: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return srv, p, tr
}

func acquire(key, value string) transport.Op {
	return transport.Op{Kind: transport.Acquire, Key: key, Value: value, TTL: 10 * time.Second}
}

// do runs one op with timeout and returns its result.
func do(tr transport.Transport, timeout time.Duration, op transport.Op) transport.Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res := make([]transport.Result, 1)
	_ = tr.Do(ctx, []transport.Op{op}, res)
	return res[0]
}

// eventually retries op until it succeeds (the transport reconnecting).
func eventually(t *testing.T, tr transport.Transport, op transport.Op) transport.Result {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := do(tr, time.Second, op)
		if r.Err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s still failing: %v", op.Kind, op.Key, r.Err)
		}
		time.Sleep(5 * time.Millisecond) // a poll: the transport reports no reconnection
	}
}

func TestForwards(t *testing.T) {
	srv, p, tr := setup(t)
	if r := do(tr, time.Second, acquire("k", "v")); r.Err != nil || !r.OK {
		t.Fatalf("acquire through the proxy: %+v", r)
	}
	if v, ok := srv.Get(t, "k"); !ok || v != "v" {
		t.Fatalf("server has k=%q (%v), want v", v, ok)
	}
	if r := do(tr, time.Second, acquire("k", "w")); r.Err != nil || r.OK {
		t.Fatalf("second acquire: %+v, want refused", r)
	}
	if s := p.Stats(); s.Accepted != 1 {
		t.Fatalf("stats %+v, want one connection", s)
	}
	if p.Target() != srv.Addr {
		t.Fatalf("Target %s, want %s", p.Target(), srv.Addr)
	}
}

func TestDelay(t *testing.T) {
	_, p, tr := setup(t)
	const d = 40 * time.Millisecond
	p.SetDelay(d)
	if p.Delay() != d {
		t.Fatalf("Delay() = %v", p.Delay())
	}
	start := time.Now()
	if r := do(tr, time.Second, acquire("slow", "v")); r.Err != nil || !r.OK {
		t.Fatalf("acquire with delay: %+v", r)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("a round trip took %v through a %v one-way delay, want at least %v", took, d, 2*d)
	}
	// A deadline shorter than the round trip fails the op, though the SET
	// still reaches the server: the ambiguous outcome the engine must clean
	// up after.
	if r := do(tr, d, acquire("late", "v")); r.Err == nil {
		t.Fatalf("acquire with a deadline below the delay: %+v, want an error", r)
	}
	p.SetDelay(0)
	if r := eventually(t, tr, acquire("late", "w")); r.OK {
		t.Fatal("the timed-out SET did not land: late was free")
	}
	start = time.Now()
	do(tr, time.Second, acquire("fast", "v"))
	if took := time.Since(start); took > d {
		t.Fatalf("a round trip took %v after SetDelay(0)", took)
	}
}

func TestResetSendsRST(t *testing.T) {
	srv, p, _ := setup(t)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING through the proxy: %q %v", buf[:n], err)
	}
	if n := p.Reset(); n != 2 { // the transport's connection and ours
		t.Fatalf("Reset aborted %d connections, want 2", n)
	}
	_, err = c.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v, want ECONNRESET", err)
	}
	if s := p.Stats(); s.Resets != 2 {
		t.Fatalf("stats %+v", s)
	}
	_ = srv
}

func TestResetReconnects(t *testing.T) {
	_, p, tr := setup(t)
	epoch := tr.Epoch()
	p.Reset()
	eventually(t, tr, acquire("after-reset", "v"))
	if tr.Epoch() == epoch {
		t.Fatalf("epoch %d unchanged after a reset: the transport did not notice its connection died", epoch)
	}
}

func TestCutHoldsThenDelivers(t *testing.T) {
	srv, p, tr := setup(t)
	eventually(t, tr, acquire("warm", "v"))
	// A cut far longer than the op's deadline: an op that waited for the
	// cut would take 2s, one that kept its 100ms deadline well under 1s even
	// on a loaded machine.
	p.Cut(2 * time.Second)
	if !p.Cutting() {
		t.Fatal("Cutting() = false during a cut")
	}
	start := time.Now()
	if r := do(tr, 100*time.Millisecond, acquire("cut", "v")); r.Err == nil {
		t.Fatalf("acquire during a cut: %+v, want a timeout", r)
	}
	if time.Since(start) > time.Second {
		t.Fatal("the op waited for the cut instead of its deadline")
	}
	if _, ok := srv.Get(t, "cut"); ok {
		t.Fatal("the SET reached the server during the cut")
	}
	// The held SET lands after the cut, though its caller gave up on it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, ok := srv.Get(t, "cut"); ok && v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the SET held by the cut never reached the server")
		}
		time.Sleep(10 * time.Millisecond) // a poll: a real server's state
	}
	if p.Cutting() {
		t.Fatal("still cutting after the cut's end")
	}
	if r := eventually(t, tr, acquire("cut", "w")); r.OK {
		t.Fatal("cut was free after the held SET landed")
	}
}

func TestCutHoldsNewConnectionsAndHeal(t *testing.T) {
	_, p, _ := setup(t)
	p.Cut(time.Hour)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	buf := make([]byte, 64)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during a cut: %v, want a timeout", err)
	}
	p.Heal()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("after Heal: %q %v", buf[:n], err)
	}
}

// A server restart is not hidden by the proxy: the client's connection dies
// with the server's, so the transport reconnects (new epoch) and sees the
// new run id, which is what the engine's restart quarantine relies on.
func TestServerRestartReachesClient(t *testing.T) {
	srv, _, tr := setup(t)
	ctx := context.Background()
	before, err := tr.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	epoch := tr.Epoch()
	srv.Kill()
	srv.Restart(t)
	eventually(t, tr, acquire("after-restart", "v"))
	if tr.Epoch() == epoch {
		t.Fatal("epoch unchanged across a server restart behind the proxy")
	}
	after, err := tr.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.RunID == before.RunID {
		t.Fatal("run id unchanged across a restart")
	}
}

func TestClose(t *testing.T) {
	_, p, tr := setup(t)
	p.Cut(time.Hour) // goroutines waiting on a cut must end too
	go do(tr, 200*time.Millisecond, acquire("k", "v"))
	// Close with the op held at the cut: a goroutine waiting for a cut to
	// heal must end too.
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Held == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the op never reached the cut")
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}

// SetTarget plus Reset: the transport's reconnect reaches the other server
// (another run id, none of the first server's keys), and SetTarget alone
// leaves the open connection where it was.
func TestSetTargetReachesOtherServer(t *testing.T) {
	srv, p, tr := setup(t)
	other := redistest.Start(t, 1)[0]
	if r := do(tr, time.Second, acquire("k", "v")); r.Err != nil || !r.OK {
		t.Fatalf("acquire: %+v", r)
	}
	first, err := tr.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.SetTarget(other.Addr)
	if p.Target() != other.Addr {
		t.Fatalf("Target() = %s, want %s", p.Target(), other.Addr)
	}
	// Not reset yet: the open connection still reaches the first server.
	if r := do(tr, time.Second, acquire("k", "w")); r.Err != nil || r.OK {
		t.Fatalf("acquire of a held key before the reset: %+v, want refused by the first server", r)
	}
	epoch := tr.Epoch()
	p.Reset()
	if r := eventually(t, tr, acquire("k", "w")); !r.OK {
		t.Fatalf("acquire after the flip: %+v, want OK on the empty server", r)
	}
	if tr.Epoch() == epoch {
		t.Errorf("epoch %d unchanged after the flip", epoch)
	}
	second, err := tr.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if second.RunID == first.RunID {
		t.Errorf("run id %s unchanged after the flip", first.RunID)
	}
	if v, _ := other.Get(t, "k"); v != "w" {
		t.Errorf("other server has k=%q, want w", v)
	}
	if v, _ := srv.Get(t, "k"); v != "v" {
		t.Errorf("first server has k=%q, want v (untouched)", v)
	}
}
