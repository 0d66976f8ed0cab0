package rueidistransport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// server is a redis-server process the test started on a free loopback
// port. (The engine's own harness is internal to its module, as it should
// be: a plugin brings its own.)
type server struct {
	t      testing.TB
	Addr   string
	port   int
	cmd    *exec.Cmd
	waited func()
}

// startRedis starts a redis-server with no persistence, waits until it
// answers PING, and kills it when t ends.
func startRedis(t testing.TB) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	s := &server{t: t, port: freePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.t.TempDir())
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := ping(s.Addr); err == nil {
			break
		} else if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer PING in 10s: %v", s.Addr, err)
		}
		select {
		case err := <-done:
			s.t.Fatalf("redis-server on %s exited: %v", s.Addr, err)
		case <-time.After(10 * time.Millisecond): // polling a process for readiness
		}
	}
	// Wait runs once, in the goroutine above; kill waits through it.
	s.waited = func() { <-done }
}

// kill ends the process (SIGKILL: no shutdown work) and waits for it.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // in case a test paused it
	_ = s.cmd.Process.Kill()
	s.waited()
	s.cmd = nil
}

// restart kills the process and starts a new one on the same port: a new
// run id and no keys.
func (s *server) restart() {
	s.t.Helper()
	s.kill()
	s.start()
}

// pause stops the process (SIGSTOP): connections stay open, nothing is
// answered. resume lets it go on.
func (s *server) pause()  { s.signal(syscall.SIGSTOP) }
func (s *server) resume() { s.signal(syscall.SIGCONT) }

func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to redis-server: %v", sig, err)
	}
}

// do runs one command on a connection of its own and returns the reply's
// first line.
func (s *server) do(args ...string) string {
	s.t.Helper()
	line, err := roundTrip(s.Addr, args...)
	if err != nil {
		s.t.Fatalf("%s on %s: %v", strings.Join(args, " "), s.Addr, err)
	}
	return line
}

func ping(addr string) error {
	line, err := roundTrip(addr, "PING")
	if err == nil && line != "+PONG" {
		err = fmt.Errorf("PING answered %q", line)
	}
	return err
}

func roundTrip(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return line, errors.New(line)
	}
	return line, nil
}

// freeAddr is a loopback address nothing listens on (for now).
func freeAddr(t testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
}

func freePort(t testing.TB) int {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
