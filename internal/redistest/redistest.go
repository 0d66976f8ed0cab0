// Package redistest runs real redis-server processes for tests: one process
// per simulated master, on a free loopback port, with no persistence, so tests
// can kill, restart (empty, like a master without persistence) and pause them.
//
// The processes themselves are internal/redisproc's (shared with the torture
// command); this package ties them to a test: t.Cleanup stops them, failures
// are t.Fatal, and helpers run commands for assertions.
package redistest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/internal/redisproc"
)

const (
	// startTimeout bounds starting (or restarting) servers, with slack for
	// loaded CI machines; they normally need 10-50ms.
	startTimeout = 30 * time.Second
	// cmdTimeout bounds each helper command so a paused server fails the
	// test instead of hanging it.
	cmdTimeout = 5 * time.Second
)

// Server is one redis-server process: Addr, Port, Pid, Kill and LogTail come
// from redisproc.Server.
type Server struct {
	*redisproc.Server
}

// Start starts n redis-server processes concurrently and waits until each
// answers PING. t.Cleanup kills every one of them, so no process outlives the
// test (on Linux not even a test binary that dies without its cleanups).
func Start(t testing.TB, n int) []*Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	procs, err := redisproc.Start(ctx, n)
	if errors.Is(err, redisproc.ErrNotFound) {
		t.Fatalf("redistest: redis-server is not on PATH (%v); these tests run real Redis "+
			"masters: run `make test` (which installs it) or `apt-get install redis-server`", err)
	}
	if err != nil {
		t.Fatalf("redistest: starting %d servers: %v", n, err)
	}
	t.Cleanup(func() { redisproc.StopAll(procs) })
	servers := make([]*Server, n)
	for i, p := range procs {
		servers[i] = &Server{p}
	}
	return servers
}

// Restart starts the server again on the same port, empty (there is no
// persistence), and waits until it answers PING; a running server is killed
// first.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.Server.Restart(ctx); err != nil {
		t.Fatalf("redistest: %v\n%s", err, s.LogTail())
	}
}

// Pause stops the process with SIGSTOP: connections stay open but nothing is
// answered, like a master stuck in a long GC or a swap storm. A server that
// is not running is left alone (so Pause and Resume fit t.Cleanup).
func (s *Server) Pause() { _ = s.Server.Pause() }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { _ = s.Server.Resume() }

// Client returns a new connection to the server for assertions, closed by
// t.Cleanup.
func (s *Server) Client(t testing.TB) radix.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", s.Addr)
	if err != nil {
		t.Fatalf("redistest: connecting to %s: %v", s.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Do runs one command on a fresh connection and unmarshals the reply into rcv
// (nil to discard); any error fails the test.
func (s *Server) Do(t testing.TB, rcv any, cmd string, args ...string) {
	t.Helper()
	if err := s.TryDo(rcv, cmd, args...); err != nil {
		t.Fatalf("redistest: %s %s on %s: %v", cmd, strings.Join(args, " "), s.Addr, err)
	}
}

// TryDo is Do that returns the error, for commands expected to fail.
func (s *Server) TryDo(rcv any, cmd string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", s.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(ctx, radix.Cmd(rcv, cmd, args...))
}

// DBSize is the number of keys in database 0.
func (s *Server) DBSize(t testing.TB) int {
	t.Helper()
	var n int
	s.Do(t, &n, "DBSIZE")
	return n
}

// Keys lists the keys of database 0 that match pattern.
func (s *Server) Keys(t testing.TB, pattern string) []string {
	t.Helper()
	var keys []string
	s.Do(t, &keys, "KEYS", pattern)
	return keys
}

// Get returns a key's value and whether it exists.
func (s *Server) Get(t testing.TB, key string) (string, bool) {
	t.Helper()
	mb := radix.Maybe{Rcv: new(string)}
	s.Do(t, &mb, "GET", key)
	return *mb.Rcv.(*string), !mb.Null
}

// GetAsking returns a key's value and whether it is on s, read as a client
// redirected there by ASK reads it: a node importing the key's slot (a
// reshard left half moved) answers a plain GET with MOVED, so the GET is
// sent again after ASKING; the owner of a migrating slot answers ASK for a
// key it does not have, which is "not here".
func (s *Server) GetAsking(t testing.TB, key string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", s.Addr)
	if err != nil {
		t.Fatalf("redistest: %s: %v", s.Addr, err)
	}
	defer c.Close()
	var v string
	mb := radix.Maybe{Rcv: &v}
	err = redisproc.DoAsking(ctx, c, &mb, "GET", key)
	if se := (resp3.SimpleError{}); errors.As(err, &se) && strings.HasPrefix(se.S, "ASK ") {
		return "", false
	}
	if err != nil {
		t.Fatalf("redistest: GET %s on %s: %v", key, s.Addr, err)
	}
	return v, !mb.Null
}

// Info is field's value in section of s's INFO, "" when INFO has no such
// field.
func (s *Server) Info(t testing.TB, section, field string) string {
	t.Helper()
	var info string
	s.Do(t, &info, "INFO", section)
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// ErrorCount is how many errors of one kind (its first word, as TRYAGAIN)
// s has answered since it started (INFO errorstats).
func (s *Server) ErrorCount(t testing.TB, kind string) int {
	t.Helper()
	var info string
	s.Do(t, &info, "INFO", "errorstats")
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_"+kind+":count="); ok {
			n, _, _ := strings.Cut(rest, ",")
			c, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("redistest: INFO errorstats on %s: %q", s.Addr, line)
			}
			return c
		}
	}
	return 0
}

// PTTL is the key's remaining time to live in milliseconds; -2 when the key
// does not exist, -1 when it has no expiry.
func (s *Server) PTTL(t testing.TB, key string) int64 {
	t.Helper()
	var ms int64
	s.Do(t, &ms, "PTTL", key)
	return ms
}

// StartCluster starts a Redis Cluster of shards masters (no replicas) on
// loopback ports and waits until it reports cluster_state:ok everywhere.
// t.Cleanup kills every node.
func StartCluster(t testing.TB, shards int) []*Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	procs, err := redisproc.StartCluster(ctx, shards)
	if errors.Is(err, redisproc.ErrNotFound) {
		t.Fatalf("redistest: redis-server is not on PATH (%v)", err)
	}
	if err != nil {
		t.Fatalf("redistest: starting a cluster of %d shards: %v", shards, err)
	}
	t.Cleanup(func() { redisproc.StopAll(procs) })
	servers := make([]*Server, shards)
	for i, p := range procs {
		servers[i] = &Server{p}
	}
	return servers
}
