//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// liveRedlock is the binary running in the background with its output read
// line by line as it comes.
type liveRedlock struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    []string // stdout and stderr lines, "1: " and "2: " prefixed
	lines  chan string
	exited chan struct{}
	code   int
}

func startLive(t *testing.T, args ...string) *liveRedlock {
	t.Helper()
	p := &liveRedlock{lines: make(chan string, 1024), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, nodesEnv+"=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	if raceEnabled {
		p.cmd.Env = append(p.cmd.Env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	for i, r := range []io.Reader{stdout, stderr} {
		prefix := []string{"1: ", "2: "}[i]
		readers.Go(func() {
			s := bufio.NewScanner(r)
			for s.Scan() {
				p.mu.Lock()
				p.out = append(p.out, prefix+s.Text())
				p.mu.Unlock()
				p.lines <- prefix + s.Text()
			}
		})
	}
	go func() {
		readers.Wait()
		close(p.lines)
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Logf("redlock %s: exit %d\n%s", strings.Join(args, " "), p.code, strings.Join(p.output(), "\n"))
	})
	return p
}

func (p *liveRedlock) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.out...)
}

// waitLine returns the first line (from now on) that contains s.
func (p *liveRedlock) waitLine(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("redlock exited before a line with %q", s)
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line with %q within 60s", s)
		}
	}
}

func (p *liveRedlock) wait(t *testing.T) int {
	t.Helper()
	go func() {
		for range p.lines {
		}
	}()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(60 * time.Second):
		t.Fatal("still running after 60s")
		return -1
	}
}

// TestBenchServesPrometheus scrapes --metrics-addr while bench runs.
func TestBenchServesPrometheus(t *testing.T) {
	p := startLive(t, "bench", "--duration", "5s", "--concurrency", "4", "--master-timeout", loaded, "--metrics-addr", "127.0.0.1:0")
	l := p.waitLine(t, "serving metrics at ")
	url := l[strings.Index(l, "http://"):]
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
		}
		body = string(b)
		if strings.Contains(body, "redlock_master_ops_total{") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no redlock metrics at %s within 30s:\n%s", url, body)
		}
		time.Sleep(50 * time.Millisecond) // a poll of another process's endpoint
	}
	for _, want := range []string{
		`redlock_lock_acquire_duration_seconds_count{`,
		`redlock_call="trylock"`,
		`redlock_outcome="acquired"`,
		`redlock_master_ops_total{`,
		`redlock_master="memory-1"`,
		`redlock_op="acquire"`,
		`redlock_result="ok"`,
		`redlock_master_batch_duration_seconds_bucket{`,
		`redlock_master_reachable{`,
		`redlock_master_quarantined{`,
		`redlock_lock_held{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("bench: exit %d, want 0", code)
	}
}

// TestMetricsAddrInUse: an address that cannot be bound is a usage error.
func TestMetricsAddrInUse(t *testing.T) {
	for _, cmd := range []string{"bench", "torture"} {
		r := redlock(t, nil, cmd, "--metrics-addr", "256.0.0.1:1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--metrics-addr 256.0.0.1:1") {
			t.Errorf("%s: exit %d, stderr %q; want %d and the flag named", cmd, r.code, r.stderr, exitUsage)
		}
	}
}

// TestStatusWatch redraws the table until interrupted.
func TestStatusWatch(t *testing.T) {
	_, nodes := startMasters(t, 3)
	p := startLive(t, "status", "--nodes", nodes, "--quarantine", "0", "--watch", "50ms")
	for range 3 {
		p.waitLine(t, "(Ctrl-C to stop)")
		p.waitLine(t, "quorum: healthy: 3 of 3 masters can vote")
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit %d after Ctrl-C, want 0", code)
	}
	headers := 0
	for _, l := range p.output() {
		if strings.HasPrefix(l, "1: MASTER") {
			headers++
		}
	}
	if headers < 3 {
		t.Errorf("%d tables drawn, want at least 3", headers)
	}
	if r := redlock(t, nil, "status", "--nodes", nodes, "--watch", "-1s"); r.code != exitUsage {
		t.Errorf("--watch -1s: exit %d, want %d", r.code, exitUsage)
	}
}

// TestRunExplainsQuarantine: on masters that just started, run says once
// that it waits for their quarantine, then runs the command.
func TestRunExplainsQuarantine(t *testing.T) {
	_, nodes := startMasters(t, 3)
	r := redlock(t, nil, "run", "--key", "q", "--nodes", nodes, "--ttl", "4s", "--quarantine", "4s", "--wait", "30s", "--", "echo", "ran")
	if r.code != 0 || r.stdout != "ran\n" {
		t.Fatalf("exit %d, stdout %q: want 0 and the command's output", r.code, r.stdout)
	}
	want := `redlock run: waiting for the lock "q": 3 of 3 masters in restart quarantine for `
	if !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr is not one line starting %q:\n%s", want, r.stderr)
	}
}

// TestRunExplainsTaken: with the lock held elsewhere, run says once that
// someone else holds it.
func TestRunExplainsTaken(t *testing.T) {
	_, nodes := startMasters(t, 3)
	e, err := engine.New(splitNodes(nodes), api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.Lock(context.Background(), "held", api.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	r := redlock(t, nil, "run", "--key", "held", "--nodes", nodes, "--quarantine", "0", "--wait", "2500ms", "--", "echo", "ran")
	if r.code != exitNotAcquired || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q: want %d and no command", r.code, r.stdout, exitNotAcquired)
	}
	want := `redlock run: waiting for the lock "held": held by someone else, waiting` + "\n"
	if !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 2 {
		t.Errorf("stderr is not the notice %q then the failure:\n%s", want, r.stderr)
	}
}

// TestRunExplainsNotVoting: on masters that answer but may not vote (their
// INFO refused to the ACL user), run says so, not that they are unreachable
// nor that nothing answered.
func TestRunExplainsNotVoting(t *testing.T) {
	servers, _ := startMasters(t, 3)
	var nodes []string
	for _, s := range servers {
		s.Do(t, nil, "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-info")
		nodes = append(nodes, "redis://app:pw@"+s.Addr)
	}
	r := redlock(t, nil, "run", "--key", "v", "--nodes", strings.Join(nodes, ","), "--quarantine", "0", "--wait", "1200ms", "--", "echo", "ran")
	if r.code == 0 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q: want a failure and no command", r.code, r.stdout)
	}
	want := `redlock run: waiting for the lock "v": only 0 of 3 masters can vote, 2 needed`
	if !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr does not start %q:\n%s", want, r.stderr)
	}
}

// TestRunFailureNamesWhyMastersCouldNotVote: masters that answer at once
// with an error reply (OOM: full under noeviction), or that may not vote
// (INFO refused), are up. run's exit-77 message must say what they did, not
// only "masters unreachable", which sends the reader after the network.
func TestRunFailureNamesWhyMastersCouldNotVote(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup []string // run on each master
		user  bool     // connect as the ACL user "app"
		want  string
	}{
		{"error replies", []string{"CONFIG", "SET", "maxmemory", "1"}, false,
			" answering with an error reply (up, and refusing the command: each master's answer says why)"},
		{"unsafe", []string{"ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-info"}, true,
			" kept from voting as unsafe for locks (each master's answer says what to change)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers, _ := startMasters(t, 3)
			var nodes []string
			for _, s := range servers {
				s.Do(t, nil, c.setup[0], c.setup[1:]...)
				if c.user {
					nodes = append(nodes, "redis://app:pw@"+s.Addr)
				} else {
					nodes = append(nodes, s.Addr)
				}
			}
			r := redlock(t, nil, "run", "--key", "v", "--nodes", strings.Join(nodes, ","), "--quarantine", "0", "--wait", "0", "--", "echo", "ran")
			if r.code != exitUnreachable || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q: want %d and no command", r.code, r.stdout, exitUnreachable)
			}
			if !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "masters unreachable") {
				t.Errorf("stderr does not say %q, or says \"masters unreachable\":\n%s", c.want, r.stderr)
			}
		})
	}
}
