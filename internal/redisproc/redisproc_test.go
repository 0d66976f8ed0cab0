package redisproc

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

func start(t *testing.T, n int) []*Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers, err := Start(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { StopAll(servers) })
	return servers
}

func do(s *Server, rcv any, cmd string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", s.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(ctx, radix.Cmd(rcv, cmd, args...))
}

func TestKillRestartPauseStop(t *testing.T) {
	servers := start(t, 2)
	a, b := servers[0], servers[1]
	if a.Port == b.Port || a.Pid() == b.Pid() || a.Pid() == 0 {
		t.Fatalf("servers share a port or pid: %+v %+v", a, b)
	}
	for _, s := range servers {
		if err := do(s, nil, "SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
	}

	// Restart: killed with SIGKILL, back on the same port, empty.
	old, port := a.Pid(), a.Port
	if err := a.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(old, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("old process %d still exists after Restart (kill -0: %v)", old, err)
	}
	if a.Pid() == old || a.Port != port {
		t.Fatalf("after Restart: pid %d (old %d), port %d (old %d)", a.Pid(), old, a.Port, port)
	}
	var n int
	if err := do(a, &n, "DBSIZE"); err != nil || n != 0 {
		t.Fatalf("restarted server: DBSIZE %d, %v; want 0 keys (no persistence)", n, err)
	}
	if err := do(b, &n, "DBSIZE"); err != nil || n != 1 {
		t.Fatalf("other server: DBSIZE %d, %v; want its key", n, err)
	}

	// Pause: connections stay, nothing is answered; Resume answers again.
	if err := b.Pause(); err != nil {
		t.Fatal(err)
	}
	if !b.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	if err := do(b, nil, "PING"); err == nil {
		t.Fatal("PING answered by a paused server")
	}
	if err := b.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := do(b, nil, "PING"); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}

	// Kill of a paused server works, and Kill is idempotent.
	if err := b.Pause(); err != nil {
		t.Fatal(err)
	}
	pid := b.Pid()
	b.Kill()
	b.Kill()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("paused process %d survived Kill (kill -0: %v)", pid, err)
	}
	if b.Running() || b.Paused() {
		t.Fatal("killed server reports running or paused")
	}
	if err := b.Resume(); err == nil {
		t.Fatal("Resume of a killed server succeeded")
	}

	// Stop removes the data directory and forbids restarts.
	dir := a.dir
	pid = a.Pid()
	a.Stop()
	a.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d survived Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory %s left behind: %v", dir, err)
	}
	if err := a.Restart(context.Background()); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), 1)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Fatalf("Start without redis-server: %v", err)
	}
}

// TestNoOrphanWhenProgramDies runs this test binary again, has it start a
// server and exit without stopping it (as a crash does), and checks that
// the server dies with it.
func TestNoOrphanWhenProgramDies(t *testing.T) {
	if os.Getenv("REDISPROC_CRASH") == "1" {
		servers, err := Start(context.Background(), 1)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Printf("pid=%d\n", servers[0].Pid())
		os.Exit(3)
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux kills children with their parent")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoOrphanWhenProgramDies$")
	// The child exits without stopping its server, which leaves its data
	// directory behind: put it where the test cleans up.
	cmd.Env = append(os.Environ(), "REDISPROC_CRASH=1", "TMPDIR="+t.TempDir())
	out, _ := cmd.Output()
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "pid=%d", &pid); err != nil || pid <= 0 {
		t.Fatalf("child printed %q: %v", out, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("redis-server %d outlived the program that started it", pid)
		}
		time.Sleep(10 * time.Millisecond) // a poll: the end of a process that is not our child
	}
}
