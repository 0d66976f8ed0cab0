package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/redis"
)

// Issue 9, finding 4: one server listed twice (two names, two database
// numbers, a proxy and the server itself) would supply two votes. Masters
// whose run ids match are a configuration error.

func runID(t *testing.T, s *redistest.Server) string {
	t.Helper()
	id := s.Info(t, "server", "run_id")
	if id == "" {
		t.Fatalf("no run_id in INFO server of %s", s.Addr)
	}
	return id
}

// checkTwins checks err refuses masters i and j (1-based), named a and b, as
// one server with run id id.
func checkNewTwins(t *testing.T, err error, i, j int, a, b, id string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Op != "new" {
		t.Fatalf("%v is not an *api.Error of New", err)
	}
	checkTwins(t, err, i, j, a, b, id)
}

// checkTwins checks err refuses masters i and j (1-based), named a and b, as
// one server with run id id.
func checkTwins(t *testing.T, err error, i, j int, a, b, id string) {
	t.Helper()
	if !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("err = %v; want ErrInvalidArgument", err)
	}
	for _, want := range []string{
		fmt.Sprintf("masters %d (%q) and %d (%q)", i, a, j, b),
		"run_id " + id,
		"list each once",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestNewRefusesOneServerListedTwice(t *testing.T) {
	servers := redistest.Start(t, 2)
	s, other := servers[0], servers[1]
	id := runID(t, s)
	port := strconv.Itoa(s.Port)
	for _, tc := range []struct {
		name  string
		addrs []string
		a, b  string // the names the error must give
	}{
		{"two host names", []string{"127.0.0.1:" + port, other.Addr, "localhost:" + port}, "127.0.0.1:" + port, "localhost:" + port},
		{"two names and two databases", []string{"redis://127.0.0.1:" + port + "/0", other.Addr, "redis://localhost:" + port + "/1"}, "127.0.0.1:" + port, "localhost:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := engine.New(tc.addrs)
			if err == nil {
				_ = e.Close()
				t.Fatalf("New(%q) accepted one redis-server listed twice", tc.addrs)
			}
			checkNewTwins(t, err, 1, 3, tc.a, tc.b, id)
		})
	}
	// Two databases of one host:port were refused by the address alone,
	// before any server was asked; so they still are.
	e, err := engine.New([]string{"redis://" + s.Addr + "/0", "redis://" + s.Addr + "/1"})
	if err == nil {
		_ = e.Close()
		t.Fatal("New accepted two databases of one host:port")
	}
	if !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("two databases of one host:port: %v", err)
	}
}

// A proxy in front of a server and the server itself have different
// addresses and one process behind them.
func TestNewWithTransportsRefusesProxyAndServer(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	p, err := faultproxy.New(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var ts []transport.Transport
	for _, addr := range []string{s.Addr, p.Addr()} {
		rt, err := redis.New(redis.Config{Addr: addr})
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, rt)
	}
	e, err := engine.NewWithTransports(ts)
	if err == nil {
		_ = e.Close()
		t.Fatal("NewWithTransports accepted a server and a proxy to it as two masters")
	}
	checkNewTwins(t, err, 1, 2, s.Addr, p.Addr(), runID(t, s))
}

func TestNewWithTransportsRefusesOneMemoryMasterTwice(t *testing.T) {
	m, n := memory.New(), memory.New()
	ts := []transport.Transport{newFlipper("x", 0, m), newFlipper("y", 0, n), newFlipper("z", 0, m)}
	e, err := engine.NewWithTransports(ts)
	if err == nil {
		_ = e.Close()
		t.Fatal("NewWithTransports accepted one memory master behind two names")
	}
	si, _ := m.Transport().(transport.ServerReporter).ServerInfo(context.Background())
	checkNewTwins(t, err, 1, 3, "x", "z", si.RunID)
}

// A master that was down at construction comes up as the same server as
// another entry: neither of them votes while both reach it, and once it
// moves away the other votes again.
func TestTwinsFoundAtRunTimeDoNotVote(t *testing.T) {
	const ttl = 10 * time.Second
	m0, m2, m3 := memory.New(), memory.New(), memory.New()
	x := newFlipper("x", time.Hour, m0)
	y := newFlipper("y", time.Hour, m0, m3)
	y.to(-1) // down at construction
	z := newFlipper("z", time.Hour, m2)
	logs := &logRecords{}
	e := warmEngine(t, []transport.Transport{x, y, z}, ttl, logs, "with y down, x and z should vote")
	ctx := context.Background()
	// z refuses k, so every TryLock of k waits for y's answer: by the time
	// it returns, y has read the server behind it.
	hold(t, "k", time.Hour, m2)

	y.to(0) // y comes up, and reaches x's server
	si, _ := m0.Transport().(transport.ServerReporter).ServerInfo(ctx)
	// Until y's node has read its server, x votes (and y's answers wait for
	// that read): one server, one vote. z refuses k, so no TryLock of k is
	// ever granted. Once y has read it, x's answers are the configuration
	// error; y's first batch triggers that read, so this takes a round or
	// two.
	for attempt := 0; ; attempt++ {
		held, err := e.TryLock(ctx, "k")
		if err == nil {
			_ = held.Unlock(ctx)
			t.Fatal("granted while z refuses and x and y reach one server")
		}
		if _, me := masterAnswer(t, err, "x"); errors.Is(me, api.ErrInvalidArgument) {
			checkTwins(t, me, 1, 2, "x", "y", si.RunID)
			break
		}
		if attempt == 100 {
			t.Fatalf("x still votes after %d attempts with y on the same server: %v", attempt, err)
		}
	}
	// z grants j, so the outcome waits for y: both are refused as one server.
	held, err := e.TryLock(ctx, "j")
	if err == nil {
		_ = held.Unlock(ctx)
		t.Fatal("granted on x and y, one server, and z")
	}
	for _, name := range []string{"x", "y"} {
		me := masterErr(t, err, name)
		if !errors.Is(me, api.ErrInvalidArgument) {
			t.Fatalf("%s answered %v; want the configuration error (%v)", name, me, err)
		}
		checkTwins(t, me, 1, 2, "x", "y", si.RunID)
	}
	if n := logs.count(slog.LevelError, "one server"); n != 1 {
		t.Fatalf("%d error log lines about the twins; want 1", n)
	}

	// y moves on to another server: new behind its address, it sits out
	// its quarantine, and x, alone again, votes. z grants k3: the outcome
	// waits for y unless y has read m3 already (then x and z grant it).
	y.to(1)
	held, err = e.TryLock(ctx, "k3")
	if err == nil {
		_ = held.Unlock(ctx)
	} else if me := masterErr(t, err, "y"); !errors.Is(me, api.ErrQuarantined) {
		t.Fatalf("y, moved to another server, answered %v; want ErrQuarantined (%v)", me, err)
	}
	held, err = e.TryLock(ctx, "k2")
	if err != nil {
		t.Fatalf("x and z should vote once y reaches another server: %v", err)
	}
	_ = held.Unlock(ctx)
}

// Real servers: y is a proxy that reaches nothing at construction, then
// reaches database 1 of x's server (x uses database 0). Two keyspaces of
// one process: before the fix both granted, and one process made a
// majority on its own while z refused.
func TestRedisTwinsFoundAtRunTimeDoNotVote(t *testing.T) {
	const period = 2 * time.Second
	servers := redistest.Start(t, 2)
	s, zs := servers[0], servers[1]
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now: connections are refused
	p, err := faultproxy.New(deadAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cfgs := []redis.Config{
		{Addr: "redis://" + s.Addr + "/0"},
		{Addr: "redis://" + p.Addr() + "/1", ReconnectInitial: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond},
		{Addr: zs.Addr},
	}
	var ts []transport.Transport
	for _, cfg := range cfgs {
		rt, err := redis.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, rt)
	}
	up := make(chan struct{})
	y := &watched{Transport: ts[1].(*redis.Transport), up: up}
	ts[1] = y
	logs := &logRecords{}
	e, err := engine.NewWithTransports(ts, api.WithTTL(period), api.WithRestartQuarantine(period), api.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatalf("construction with y down: %v", err)
	}
	defer e.Close()
	// x and z (y is down) sit out their period; Lock retries until both vote.
	wctx, cancel := context.WithTimeout(context.Background(), 10*period)
	defer cancel()
	l, err := e.Lock(wctx, "warm", api.WithMaxAttempts(0))
	if err != nil {
		t.Fatalf("x and z never voted: %v", err)
	}
	_ = l.Unlock(context.Background())
	zs.Do(t, nil, "SET", "k", "someone-else", "PX", "60000") // z refuses k

	p.SetTarget(s.Addr)
	select {
	case <-up:
	case <-wctx.Done():
		t.Fatal("the engine never read the server behind y")
	}
	held, err := e.TryLock(context.Background(), "k")
	if err == nil {
		_ = held.Unlock(context.Background())
		t.Fatal("granted by x and y, two databases of one redis-server, while z refused: one process voted twice")
	}
	// x may have answered before y's node read its server (then x's vote
	// counted and the outcome waited for y's refusal), or after (then x was
	// refused and y's answer may not have been waited for). Either way y
	// has been read by now, and on j, which z grants, the outcome waits for
	// y: both are refused as one server.
	held, err = e.TryLock(context.Background(), "j")
	if err == nil {
		_ = held.Unlock(context.Background())
		t.Fatal("granted on x and y, one redis-server, and z")
	}
	id := runID(t, s)
	for _, name := range []string{s.Addr, p.Addr()} {
		me := masterErr(t, err, name)
		if !errors.Is(me, api.ErrInvalidArgument) {
			t.Fatalf("%s answered %v; want the configuration error (%v)", name, me, err)
		}
		checkTwins(t, me, 1, 2, s.Addr, p.Addr(), id)
	}
	if n := logs.count(slog.LevelError, "one server"); n != 1 {
		t.Fatalf("%d error log lines about the twins; want 1", n)
	}
}
