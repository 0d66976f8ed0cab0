// Package redistest runs real redis-server processes for tests: one process
// per simulated master, on a free loopback port, with no persistence, so tests
// can kill, restart (empty, like a master without persistence) and pause them.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
)

const (
	// readyTimeout bounds how long a starting server may take to answer PING.
	// Servers normally need 10-50ms; the slack is for loaded CI machines.
	readyTimeout = 10 * time.Second
	// startAttempts is how many ports Start tries per server, because a free
	// port found by binding :0 can be taken by someone else before redis
	// binds it.
	startAttempts = 5
	// rebindTimeout bounds Restart's retries on the same port.
	rebindTimeout = 3 * time.Second
	// logTail is how much of a server's log goes into failure messages.
	logTail = 2048
	// cmdTimeout bounds each helper command so a paused server fails the
	// test instead of hanging it.
	cmdTimeout = 5 * time.Second
)

// Server is one redis-server process.
type Server struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	Port int

	bin string
	dir string

	mu      sync.Mutex
	proc    *process
	logPath string
	starts  int // numbers log files, so a restart's log doesn't overwrite the last one
}

// process is one run of redis-server on the server's port.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait has returned
	log    *os.File
}

// errPortInUse means the port was taken before redis bound it; the caller may
// try again.
var errPortInUse = errors.New("port in use")

// Start starts n redis-server processes concurrently and waits until each
// answers PING. t.Cleanup kills every one of them (SIGKILL, then Wait), so no
// process outlives the test.
func Start(t testing.TB, n int) []*Server {
	t.Helper()
	bin := lookPath(t)
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		s := &Server{bin: bin, dir: t.TempDir()}
		servers[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.startOnFreePort()
		}()
	}
	wg.Wait()
	// Registered before reporting failures so that the servers that did
	// start are killed too.
	t.Cleanup(func() {
		for _, s := range servers {
			s.Kill()
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("redistest: server %d of %d: %v", i+1, n, err)
		}
	}
	return servers
}

func lookPath(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not on PATH (%v); these tests run real Redis "+
			"masters: run `make test` (which installs it) or `apt-get install redis-server`", err)
	}
	return bin
}

func (s *Server) startOnFreePort() error {
	var err error
	for range startAttempts {
		var port int
		port, err = freePort()
		if err != nil {
			return err
		}
		s.Port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.mu.Lock()
		err = s.startLocked()
		s.mu.Unlock()
		if !errors.Is(err, errPortInUse) {
			return err
		}
	}
	return fmt.Errorf("no free port after %d attempts: %w", startAttempts, err)
}

// freePort asks the kernel for a port that is free now. Another process may
// take it before redis binds it; startOnFreePort retries for that.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startLocked starts redis-server on s.Port and waits for PING. s.mu is held.
func (s *Server) startLocked() error {
	s.starts++
	s.logPath = filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.starts))
	logf, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", "", // to stdout, which is our log file
	)
	// Files, not buffers: with an *os.File exec starts no copying goroutines,
	// and the log survives for the failure message.
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	s.proc = p

	if err := waitReady(s.Addr, cmd.Process.Pid, p.exited); err != nil {
		s.killLocked()
		tail := s.logTailLocked()
		if strings.Contains(tail, "Address already in use") {
			return fmt.Errorf("%w: %s", errPortInUse, s.Addr)
		}
		return fmt.Errorf("redis-server on %s: %w\n--- log tail ---\n%s", s.Addr, err, tail)
	}
	return nil
}

// waitReady polls until our process answers, it exits, or readyTimeout.
func waitReady(addr string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		default:
		}
		if lastErr = ping(addr, pid); lastErr == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("no PING answer within %v: %w", readyTimeout, lastErr)
}

// ping checks that the server on addr answers and is process pid: when the
// port was taken by another test's server in the meantime, that one answers
// too, and ours is about to exit with "Address already in use".
func ping(addr string, pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var info string
	if err := c.Do(ctx, radix.Cmd(&info, "INFO", "server")); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	if !strings.Contains(info, want) {
		return fmt.Errorf("%s is answered by another process, not pid %d", addr, pid)
	}
	return nil
}

// Pid is the current process id, or 0 when the server is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Kill kills the server with SIGKILL and waits until it has exited. It does
// nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	// SIGKILL also ends a stopped (paused) process.
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.log.Close()
}

// Restart starts the server again on the same port, empty (there is no
// persistence), and waits until it answers PING. A running server is killed
// first. The port is normally free at once after a kill; Restart retries
// briefly in case it is not.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	deadline := time.Now().Add(rebindTimeout)
	for {
		err := s.startLocked()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			t.Fatalf("redistest: restarting %s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pause stops the process with SIGSTOP: connections stay open but nothing is
// answered, like a master stuck in a long GC or a swap storm.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.cmd.Process.Signal(sig)
	}
}

// LogTail returns the end of the current (or last) run's log.
func (s *Server) LogTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logTailLocked()
}

func (s *Server) logTailLocked() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return string(b)
}

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

// PTTL is the key's remaining time to live in milliseconds; -2 when the key
// does not exist, -1 when it has no expiry.
func (s *Server) PTTL(t testing.TB, key string) int64 {
	t.Helper()
	var ms int64
	s.Do(t, &ms, "PTTL", key)
	return ms
}
