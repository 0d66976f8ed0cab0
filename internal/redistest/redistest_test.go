package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartKillRestart(t *testing.T) {
	servers := Start(t, 2)
	a, b := servers[0], servers[1]
	if a.Port == b.Port || a.Pid() == b.Pid() {
		t.Fatalf("servers share a port or pid: %+v %+v", a, b)
	}
	for _, s := range servers {
		s.Do(t, nil, "SET", "k", "v")
		if n := s.DBSize(t); n != 1 {
			t.Fatalf("%s: DBSize = %d, want 1", s.Addr, n)
		}
	}

	oldPid := a.Pid()
	a.Kill()
	if a.Pid() != 0 {
		t.Fatalf("Pid after Kill = %d, want 0", a.Pid())
	}
	if err := syscall.Kill(oldPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists after Kill (kill -0: %v)", oldPid, err)
	}
	if err := a.TryDo(nil, "PING"); err == nil {
		t.Fatal("PING succeeded on a killed server")
	}
	a.Kill() // idempotent

	a.Restart(t)
	if a.Pid() == 0 || a.Pid() == oldPid {
		t.Fatalf("Pid after Restart = %d (old %d)", a.Pid(), oldPid)
	}
	if n := a.DBSize(t); n != 0 {
		t.Fatalf("restarted server has %d keys, want 0 (no persistence)", n)
	}
	if v, ok := b.Get(t, "k"); !ok || v != "v" {
		t.Fatalf("other server lost its key: %q %v", v, ok)
	}
	if _, ok := a.Get(t, "k"); ok {
		t.Fatal("restarted server still has k")
	}
	// Restart of a running server replaces it.
	pid := a.Pid()
	a.Restart(t)
	if a.Pid() == pid {
		t.Fatal("Restart of a running server kept the old process")
	}
}

func TestPauseResume(t *testing.T) {
	s := Start(t, 1)[0]
	c := s.Client(t)

	s.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err := c.Do(ctx, radix.Cmd(nil, "PING"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PING on a paused server: %v, want deadline exceeded", err)
	}

	s.Resume()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pong string
	if err := c.Do(ctx, radix.Cmd(&pong, "PING")); err != nil || pong != "PONG" {
		t.Fatalf("PING after Resume: %q %v", pong, err)
	}
}

func TestKillPausedAndCleanup(t *testing.T) {
	var pid int
	t.Run("inner", func(t *testing.T) {
		s := Start(t, 1)[0]
		pid = s.Pid()
		s.Pause() // cleanup must still kill it
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d outlived its test (kill -0: %v)", pid, err)
	}
}

func TestHelpers(t *testing.T) {
	s := Start(t, 1)[0]
	s.Do(t, nil, "SET", "a:1", "x", "PX", "60000")
	s.Do(t, nil, "SET", "b:1", "y")
	if keys := s.Keys(t, "a:*"); len(keys) != 1 || keys[0] != "a:1" {
		t.Fatalf("Keys = %v", keys)
	}
	if ms := s.PTTL(t, "a:1"); ms <= 0 || ms > 60000 {
		t.Fatalf("PTTL = %d", ms)
	}
	if ms := s.PTTL(t, "missing"); ms != -2 {
		t.Fatalf("PTTL of a missing key = %d, want -2", ms)
	}
	if s.LogTail() == "" {
		t.Fatal("empty log")
	}
}

func TestNoRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(ft, 1)
	}()
	<-done
	if ft.msg == "" {
		t.Fatal("Start without redis-server on PATH did not fail")
	}
	for _, want := range []string{"redis-server", "make test", "apt-get install redis-server"} {
		if !strings.Contains(ft.msg, want) {
			t.Errorf("message %q does not mention %q", ft.msg, want)
		}
	}
}

// fatalTB records Fatalf and ends the goroutine, as testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestNoOrphanWhenTestBinaryDies runs this test binary again, has it start a
// server and exit without cleanups (as a panic or test timeout does), and
// checks that the server dies with it.
func TestNoOrphanWhenTestBinaryDies(t *testing.T) {
	if os.Getenv("REDISTEST_CRASH") == "1" {
		s := Start(t, 1)[0]
		fmt.Printf("pid=%d\n", s.Pid())
		os.Exit(3)
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux kills children with their parent")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoOrphanWhenTestBinaryDies$")
	cmd.Env = append(os.Environ(), "REDISTEST_CRASH=1")
	out, _ := cmd.Output()
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "pid=%d", &pid); err != nil || pid <= 0 {
		t.Fatalf("child printed %q: %v", out, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("redis-server %d outlived its test binary", pid)
		}
		time.Sleep(10 * time.Millisecond) // a poll: the end of a process that is not our child
	}
}
