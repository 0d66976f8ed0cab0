// Package redisproc runs real redis-server processes for programs (the
// redlock command's torture and bench --spawn-redis) and tests: one process
// per simulated master, on a free loopback port, with no persistence, and
// the process faults a fault schedule needs: kill -9 and restart empty on
// the same port, SIGSTOP and SIGCONT (Unix only).
//
// It is the non-testing counterpart of internal/redistest, which reports
// through testing.TB and ties each server's life to a test's cleanups. The
// start-and-wait-for-PING logic (about fifty lines) is duplicated from there
// on purpose: redistest is used by every other package's tests and is left
// as it is.
//
// Every process is stopped by its pid: Stop (or StopAll) kills it with
// SIGKILL and waits for it. On Unix each server runs in a process group of
// its own, so that a Ctrl-C on the terminal reaches only the program, which
// stops its servers itself. On Linux the kernel also kills the servers when
// the program that started them dies without stopping them (a panic on
// another goroutine, kill -9 of the program), so none is left behind.
package redisproc

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
	"time"

	"github.com/mediocregopher/radix/v4"
)

const (
	// readyTimeout bounds how long a starting server may take to answer
	// PING. Servers normally need 10-50ms; the slack is for loaded machines.
	readyTimeout = 10 * time.Second
	// startAttempts is how many ports Start tries per server, because a
	// free port found by binding :0 can be taken by someone else before
	// redis binds it.
	startAttempts = 5
	// rebindTimeout bounds Restart's retries on the same port.
	rebindTimeout = 3 * time.Second
	// logTail is how much of a server's log goes into error messages.
	logTail = 2048
)

// ErrNotFound is returned by Start when redis-server is not on PATH.
var ErrNotFound = errors.New("redis-server not found on PATH")

// errPortInUse means the port was taken before redis bound it; the caller
// may try again.
var errPortInUse = errors.New("port in use")

// Server is one redis-server process, restartable on its port.
type Server struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	Port int

	bin string
	dir string

	mu      sync.Mutex
	proc    *process
	paused  bool
	starts  int
	logPath string
	stopped bool

	// BusPort is the Redis Cluster bus port of a cluster node (StartCluster),
	// 0 for a standalone server. A restart keeps it: the other nodes know it.
	BusPort int
	// announce is the port a cluster node advertises (Announce), 0: its own.
	announce int

	// TLSPort serves TLS beside Port, for a server of StartTLS (tls.go);
	// 0 for none.
	TLSPort int
	tls     *TLSFiles
}

type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait has returned
	log    *os.File
}

// LookPath finds redis-server, or fails with an error wrapping ErrNotFound
// that says how to install it.
func LookPath() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w (%v): install it with `apt-get install redis-server` or run `make deps`", ErrNotFound, err)
	}
	return bin, nil
}

// Start starts n redis-server processes concurrently, each on a free
// loopback port with a data directory of its own under a new temporary
// directory, and waits until each answers PING. On error every server that
// did start is stopped again. The caller must call Stop on each server (or
// StopAll) when done.
func Start(ctx context.Context, n int) ([]*Server, error) { return startServers(ctx, n, nil) }

func startServers(ctx context.Context, n int, tls *TLSFiles) ([]*Server, error) {
	bin, err := LookPath()
	if err != nil {
		return nil, err
	}
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		dir, err := os.MkdirTemp("", "redisproc-")
		if err != nil {
			StopAll(servers[:i])
			return nil, err
		}
		s := &Server{bin: bin, dir: dir, tls: tls}
		servers[i] = s
		wg.Go(func() { errs[i] = s.startOnFreePort(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		StopAll(servers)
		return nil, err
	}
	return servers, nil
}

// StopAll stops every server (nil entries are skipped).
func StopAll(servers []*Server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		if s != nil {
			wg.Go(s.Stop)
		}
	}
	wg.Wait()
}

func (s *Server) startOnFreePort(ctx context.Context) error {
	var err error
	for attempt := range startAttempts {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		if attempt > 0 && s.BusPort != 0 {
			// The port in use may have been the cluster bus port (another
			// server's main port can be handed out as it): pick both anew,
			// or every retry fails on the same bus port.
			if s.BusPort, err = freePort(); err != nil {
				return err
			}
		}
		if s.tls != nil {
			if s.TLSPort, err = freePort(); err != nil {
				return err
			}
		}
		s.Port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.mu.Lock()
		err = s.startLocked(ctx)
		s.mu.Unlock()
		if !errors.Is(err, errPortInUse) {
			return err
		}
	}
	return fmt.Errorf("redisproc: no free port after %d attempts: %w", startAttempts, err)
}

// freePort asks the kernel for a port that is free now. Another process may
// take it before redis binds it; startOnFreePort retries for that.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startLocked starts redis-server on s.Port and waits for PING. s.mu is held.
func (s *Server) startLocked(ctx context.Context) error {
	if s.stopped {
		return errors.New("redisproc: server stopped")
	}
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
	cmd.Args = append(cmd.Args, s.clusterArgs()...)
	cmd.Args = append(cmd.Args, s.tlsArgs()...)
	// Files, not buffers: with an *os.File exec starts no copying
	// goroutines, and the log survives for error messages.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("redisproc: starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	s.proc, s.paused = p, false
	if err := waitReady(ctx, s.Addr, cmd.Process.Pid, p.exited); err != nil {
		s.killLocked()
		tail := s.logTailLocked()
		if strings.Contains(tail, "Address already in use") {
			return fmt.Errorf("%w: %s", errPortInUse, s.Addr)
		}
		return fmt.Errorf("redisproc: redis-server on %s: %w\n--- log tail ---\n%s", s.Addr, err, tail)
	}
	return nil
}

// waitReady polls until our process answers, it exits, ctx ends or
// readyTimeout passes.
func waitReady(ctx context.Context, addr string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if lastErr = ping(ctx, addr, pid); lastErr == nil {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("no PING answer within %v: %w", readyTimeout, lastErr)
}

// ping checks that the server on addr answers and is process pid: when the
// port was taken by another server in the meantime, that one answers too,
// and ours is about to exit with "Address already in use".
func ping(ctx context.Context, addr string, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
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
	if !strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n") {
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

// Running reports whether a process is running (paused counts as running).
func (s *Server) Running() bool { return s.Pid() != 0 }

// Paused reports whether the process is stopped with SIGSTOP.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.paused
}

// Kill kills the process with SIGKILL (kill -9: no shutdown, no save) and
// waits until it has exited. It does nothing if the server is not running.
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
	s.proc, s.paused = nil, false
	// SIGKILL also ends a stopped (paused) process.
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.log.Close()
}

// Restart kills the running process, if any, and starts a new one on the
// same port: empty, since there is no persistence. It waits until the new
// process answers PING. The port is normally free at once after a kill;
// Restart retries briefly in case it is not.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	deadline := time.Now().Add(rebindTimeout)
	for {
		err := s.startLocked(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			return fmt.Errorf("redisproc: restarting %s: %w", s.Addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pause stops the process with SIGSTOP: connections stay open but nothing
// is answered, like a master stuck in a long fork, swap storm or VM stall.
// Off Unix it fails with errors.ErrUnsupported.
func (s *Server) Pause() error { return s.signal(pauseSignal, true) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error { return s.signal(resumeSignal, false) }

func (s *Server) signal(sig os.Signal, paused bool) error {
	if sig == nil {
		return fmt.Errorf("redisproc: pausing a process needs a Unix: %w", errors.ErrUnsupported)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("redisproc: %s is not running", s.Addr)
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.paused = paused
	return nil
}

// Stop kills the process and removes the server's data directory. The
// server cannot be restarted afterwards. Stop is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	if !s.stopped {
		s.stopped = true
		_ = os.RemoveAll(s.dir)
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
