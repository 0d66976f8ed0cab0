//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redistest"
)

// The test binary doubles as a command for redlock run to start: with
// helperEnv=interval it appends one line "start end key value token" (times
// in Unix nanoseconds) to the file named by its first argument, after
// sleeping for the duration given as its second.
const helperEnv = "REDLOCK_RUN_TEST_HELPER"

func init() {
	if os.Getenv(helperEnv) == "interval" {
		os.Exit(intervalHelper(os.Args[1:]))
	}
}

func intervalHelper(args []string) int {
	start := time.Now().UnixNano()
	d, err := time.ParseDuration(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	time.Sleep(d) // the command's work, in the helper process: what the lock protects
	line := fmt.Sprintf("%d %d %s %s %s\n", start, time.Now().UnixNano(),
		os.Getenv(envKey), os.Getenv(envValue), os.Getenv(envToken))
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(line) // one write: O_APPEND keeps lines whole
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// bgRedlock is a redlock process running in the background.
type bgRedlock struct {
	t              *testing.T
	cmd            *exec.Cmd
	args           []string
	stdout, stderr bytes.Buffer
	done           chan struct{}
	res            result
}

// startRedlock starts the binary in its own session, so that it has no
// controlling terminal even when the tests run in one: run then puts the
// command in a process group of its own, the mode under test here. The test
// kills it if it is still running at the end.
func startRedlock(t *testing.T, env []string, args ...string) *bgRedlock {
	t.Helper()
	p := &bgRedlock{t: t, args: args, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, nodesEnv+"=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	if raceEnabled {
		p.cmd.Env = append(p.cmd.Env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.res = result{stdout: p.stdout.String(), stderr: p.stderr.String()}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.res.code = ee.ExitCode()
		default:
			p.res.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // it and what it started
			<-p.done
		}
	})
	return p
}

// wait waits up to timeout for the process to exit.
func (p *bgRedlock) wait(timeout time.Duration) result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.t.Fatalf("redlock %s: still running after %v\nstderr:\n%s", strings.Join(p.args, " "), timeout, p.res.stderr)
	}
	p.t.Logf("redlock %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(p.args, " "), p.res.code, p.res.stdout, p.res.stderr)
	return p.res
}

// waitFile waits until path exists and has at least lines lines.
func waitFile(t *testing.T, path string, lines int, p *bgRedlock) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Count(string(b), "\n") >= lines {
			return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		}
		select {
		case <-p.done:
			t.Fatalf("redlock %s exited (%d) before the command wrote %s\nstderr:\n%s", strings.Join(p.args, " "), p.res.code, path, p.res.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %d lines after 30s", path, lines)
		}
		// A poll: another process writes the file, and tells nobody.
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunExclusive starts several runs on one key at once over five real
// masters: the commands' intervals must not overlap, every one must run,
// and the fencing tokens must grow in the order the lock was granted.
func TestRunExclusive(t *testing.T) {
	_, nodes := startMasters(t, 5)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "intervals")
	const runs = 4
	procs := make([]*bgRedlock, runs)
	for i := range procs {
		procs[i] = startRedlock(t, []string{helperEnv + "=interval"}, "run", "--key", "exclusive", "--nodes", nodes,
			"--quarantine", "0", "--wait", "60s", "--fencing", "--", self, out, "300ms")
	}
	for _, p := range procs {
		if r := p.wait(90 * time.Second); r.code != 0 {
			t.Errorf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	type interval struct {
		start, end, token int64
		key, value        string
	}
	var ivs []interval
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var iv interval
		var token string
		if _, err := fmt.Sscan(l, &iv.start, &iv.end, &iv.key, &iv.value, &token); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if iv.token, err = strconv.ParseInt(token, 10, 64); err != nil {
			t.Fatalf("line %q: token: %v", l, err)
		}
		ivs = append(ivs, iv)
	}
	if len(ivs) != runs {
		t.Fatalf("%d commands ran, want %d:\n%s", len(ivs), runs, b)
	}
	slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
	values := map[string]bool{}
	for i, iv := range ivs {
		if iv.key != "exclusive" || values[iv.value] {
			t.Errorf("run %d: key %q, value %q: want the key and a value of its own", i, iv.key, iv.value)
		}
		values[iv.value] = true
		if i == 0 {
			continue
		}
		prev := ivs[i-1]
		if iv.start < prev.end {
			t.Errorf("run %d started %v before run %d ended: the commands overlapped", i, time.Duration(prev.end-iv.start), i-1)
		}
		if iv.token <= prev.token {
			t.Errorf("run %d has token %d, run %d before it %d: want growing tokens", i, iv.token, i-1, prev.token)
		}
	}
}

// TestRunLost takes a majority of the masters away from under two running
// commands, flushed or hung: the locks are lost, and run stops each command
// and what it started (one of them ignores SIGTERM and gets SIGKILL after
// --grace, or when the lock's validity ends if that comes first), exiting 76.
func TestRunLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, s *redistest.Server) // what happens to three of the five masters
		term string                                  // what run says as it sends SIGTERM
		kill string                                  // why it sends SIGKILL
	}{
		// Masters that lost the keys (flushed): the next extension finds
		// the lock gone, and the command gets its whole grace, which ends
		// before the lock's validity would have.
		{"flushed", func(t *testing.T, s *redistest.Server) { s.Do(t, nil, "FLUSHALL") }, "SIGTERM now, SIGKILL after --grace 1s", "did not stop within --grace 1s"},
		// Masters that hang: the extension retries until the validity ends,
		// so run stops the command when --grace of it is left, and kills
		// it when it ends.
		{"hung", func(t *testing.T, s *redistest.Server) { t.Cleanup(s.Resume); s.Pause() }, "has not been extended", "did not stop before the lock's validity ended"},
	} {
		t.Run(tc.name, func(t *testing.T) { testRunLost(t, tc.cut, tc.term, tc.kill) })
	}
}

func testRunLost(t *testing.T, cut func(*testing.T, *redistest.Server), term, kill string) {
	servers, nodes := startMasters(t, 5)
	dir := t.TempDir()
	run := func(key, script string) (*bgRedlock, string) {
		marker := filepath.Join(dir, key)
		return startRedlock(t, nil, "run", "--key", key, "--nodes", nodes, "--ttl", "2s", "--quarantine", "0", "--grace", "1s", "--",
			"sh", "-c", script, marker), marker
	}
	// The shell writes its pid and its background sleep's to the marker.
	polite, pm := run("lost", `echo $$ > "$0"; sleep 30 & echo $! >> "$0"; wait`)
	stubborn, sm := run("stubborn", `trap "" TERM; echo $$ > "$0"; sleep 30 & echo $! >> "$0"; wait`)
	pids := append(waitFile(t, pm, 2, polite), waitFile(t, sm, 2, stubborn)...)
	for _, s := range servers[:3] {
		cut(t, s)
	}
	cutAt := time.Now()
	for _, tc := range []struct {
		p    *bgRedlock
		key  string
		want []string
	}{
		{polite, "lost", []string{term, `the lock "lost" was lost while the command ran; the command was killed by SIGTERM`}},
		{stubborn, "stubborn", []string{term, kill + ": sending SIGKILL", `the lock "stubborn" was lost while the command ran; the command was killed by SIGKILL`}},
	} {
		r := tc.p.wait(30 * time.Second)
		if r.code != exitLost {
			t.Errorf("%s: exit %d, want %d (lost)", tc.key, r.code, exitLost)
		}
		if tc.key == "lost" && strings.Contains(r.stderr, "sending SIGKILL") {
			t.Errorf("%s: SIGKILL for a command that stopped on SIGTERM:\n%s", tc.key, r.stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr does not say %q:\n%s", tc.key, want, r.stderr)
			}
		}
	}
	if took := time.Since(cutAt); took > 15*time.Second {
		t.Errorf("run took %v after the masters were cut off to stop the commands", took)
	}
	// The shells and the sleeps they started in the background are gone.
	for _, s := range pids {
		pid, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("pid %q: %v", s, err)
		}
		waitGone(t, pid)
	}
}

// waitCatching waits until process pid catches sig (else the signal would
// kill it before it set up its handler). Without /proc it waits a second.
func waitCatching(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			time.Sleep(time.Second) // no /proc: nothing to wait on but time
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if hex, ok := strings.CutPrefix(l, "SigCgt:"); ok {
				if mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64); err == nil && mask&(1<<(sig-1)) != 0 {
					return
				}
			}
		}
		time.Sleep(10 * time.Millisecond) // a poll: another process's signal mask
	}
	t.Fatalf("process %d does not catch %v after 30s", pid, sig)
}

// waitGone waits a little for pid to be gone (or a zombie nobody reaped).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d is still running after the lock was lost", pid)
			return
		}
		time.Sleep(20 * time.Millisecond) // a poll: the end of a process that is not our child
	}
}

// TestRunStatus: the command's exit status is run's.
func TestRunStatus(t *testing.T) {
	_, nodes := startMasters(t, 5)
	for _, tc := range []struct {
		cmd  []string
		want int
		msg  string
	}{
		{[]string{"sh", "-c", "exit 7"}, 7, ""},
		{[]string{"true"}, 0, ""},
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{[]string{"redlock-no-such-command"}, exitNotFound, `cannot run "redlock-no-such-command"`},
	} {
		t.Run(strings.Join(tc.cmd, " "), func(t *testing.T) {
			r := redlock(t, nil, append([]string{"run", "--key", "status", "--nodes", nodes, "--quarantine", "0", "--"}, tc.cmd...)...)
			if r.code != tc.want {
				t.Errorf("exit %d, want %d", r.code, tc.want)
			}
			if tc.msg == "" && r.stderr != "" || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("stderr %q, want %q", r.stderr, tc.msg)
			}
		})
	}
	// Without "--" the first argument that is not a flag starts the command.
	r := redlock(t, nil, "run", "--key", "status", "--nodes", nodes, "--quarantine", "0", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Errorf("without --: exit %d, want 3", r.code)
	}
}

// TestRunTaken holds a key with one run while others try it; then stops the
// holder with SIGTERM, which its command gets, and takes the key again.
func TestRunTaken(t *testing.T) {
	servers, nodes := startMasters(t, 5)
	marker := filepath.Join(t.TempDir(), "holding")
	holder := startRedlock(t, nil, "run", "--key", "taken", "--nodes", nodes, "--quarantine", "0", "--",
		"sh", "-c", `echo $$ > "$0"; exec sleep 60`, marker)
	waitFile(t, marker, 1, holder)

	base := []string{"run", "--key", "taken", "--nodes", nodes, "--quarantine", "0"}
	for _, wait := range []string{"0", "1s"} {
		r := redlock(t, nil, append(base, "--wait", wait, "--", "sh", "-c", "echo ran")...)
		if r.code != exitNotAcquired {
			t.Errorf("--wait %s: exit %d, want %d (taken)", wait, r.code, exitNotAcquired)
		}
		if r.stdout != "" {
			t.Errorf("--wait %s: the command ran: %q", wait, r.stdout)
		}
		if want := `not acquired: the lock "taken" is taken: another owner holds it`; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "refused") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("--wait %s: stderr is not one line saying %q with the masters' answers:\n%s", wait, want, r.stderr)
		}
	}

	// Interrupted while waiting.
	sets := setCalls(t, servers[0])
	waiter := startRedlock(t, nil, append(base, "--wait", "60s", "--", "sh", "-c", "echo ran")...)
	waitCatching(t, waiter.cmd.Process.Pid, syscall.SIGINT)
	// and is waiting for the lock: a master has refused two of its attempts.
	for deadline := time.Now().Add(30 * time.Second); setCalls(t, servers[0]) < sets+2; {
		if time.Now().After(deadline) {
			t.Fatal("the waiter made no attempt on the lock within 30s")
		}
		time.Sleep(10 * time.Millisecond) // a poll: another process's attempts on a real Redis
	}
	if err := waiter.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if r := waiter.wait(30 * time.Second); r.code != exitInterrupted || !strings.Contains(r.stderr, `interrupted (SIGINT) while waiting for the lock "taken"`) || r.stdout != "" {
		t.Errorf("SIGINT while waiting: exit %d, stderr %q, stdout %q; want %d, interrupted", r.code, r.stderr, r.stdout, exitInterrupted)
	}

	// SIGTERM to the holder reaches its command; the lock is released after.
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(30 * time.Second); r.code != 128+15 {
		t.Errorf("holder: exit %d after SIGTERM, want %d (its command killed by SIGTERM)", r.code, 128+15)
	}
	if r := redlock(t, nil, append(base, "--wait", "0", "--", "true")...); r.code != 0 {
		t.Errorf("after the holder ended: exit %d, want 0: the lock was not released", r.code)
	}
}

// setCalls is how many SET commands s has served: the lock attempts on it
// (extensions and releases are scripts).
func setCalls(t *testing.T, s *redistest.Server) int {
	t.Helper()
	var info string
	s.Do(t, &info, "INFO", "commandstats")
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_set:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
			if err != nil {
				t.Fatalf("INFO commandstats: %q: %v", l, err)
			}
			return n
		}
	}
	return 0
}

// TestRunUnreachable: with a majority of the masters down, or in
// quarantine, run says so and exits 77.
func TestRunUnreachable(t *testing.T) {
	servers, nodes := startMasters(t, 5)
	t.Run("quarantine", func(t *testing.T) {
		// The masters just started: with the default quarantine of one
		// --ttl none of them votes.
		r := redlock(t, nil, "run", "--key", "unreachable", "--nodes", nodes, "--wait", "0", "--", "echo", "ran")
		if r.code != exitUnreachable {
			t.Errorf("exit %d, want %d (unreachable)", r.code, exitUnreachable)
		}
		want := "not acquired: masters did not vote: fewer than 3 of the 5 masters could vote, "
		if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "being in restart quarantine") || r.stdout != "" {
			t.Errorf("stderr does not say %q and restart quarantine (or the command ran):\n%s", want, r.stderr)
		}
		// Every master is in quarantine. The attempt may end before the
		// last answers come (a quorum is out of reach after three), and
		// then the count must say it is a lower bound, not that two of
		// the masters could vote.
		if !strings.Contains(r.stderr, "5 being in restart quarantine") && !strings.Contains(r.stderr, "had not answered") {
			t.Errorf("stderr understates how many masters are in quarantine (all 5 are):\n%s", r.stderr)
		}
	})
	for _, s := range servers[:3] {
		s.Kill()
	}
	for _, wait := range []string{"0", "1s"} {
		t.Run("down/wait="+wait, func(t *testing.T) {
			r := redlock(t, nil, "run", "--key", "unreachable", "--nodes", nodes, "--quarantine", "0", "--wait", wait, "--", "echo", "ran")
			if r.code != exitUnreachable {
				t.Errorf("exit %d, want %d (unreachable)", r.code, exitUnreachable)
			}
			want := "not acquired: masters unreachable: fewer than 3 of the 5 masters could vote"
			if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "=failed") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("stderr is not one line saying %q with the masters' answers (or the command ran):\n%s", want, r.stderr)
			}
		})
	}
}

// TestRunEnv: the command gets the key, the value and, with --fencing, a
// growing token.
func TestRunEnv(t *testing.T) {
	_, nodes := startMasters(t, 5)
	show := []string{"--", "sh", "-c", `printf '%s|%s|%s' "$REDLOCK_KEY" "$REDLOCK_VALUE" "$REDLOCK_TOKEN"`}
	vars := func(r result) []string {
		t.Helper()
		f := strings.Split(r.stdout, "|")
		if r.code != 0 || len(f) != 3 {
			t.Fatalf("exit %d, stdout %q: want 0 and key|value|token", r.code, r.stdout)
		}
		return f
	}
	// Variables already in the environment are replaced.
	stale := []string{envKey + "=stale", envValue + "=stale", envToken + "=99"}
	f := vars(redlock(t, stale, append([]string{"run", "--key", "env", "--nodes", nodes, "--quarantine", "0"}, show...)...))
	if f[0] != "env" || len(f[1]) < 16 || f[1] == "stale" || f[2] != "" {
		t.Errorf("key %q, value %q, token %q: want env, a lock value, no token", f[0], f[1], f[2])
	}
	var tokens []int64
	for range 2 {
		f := vars(redlock(t, stale, append([]string{"run", "--key", "fenced", "--nodes", nodes, "--quarantine", "0", "--fencing"}, show...)...))
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || n < 1 {
			t.Fatalf("token %q: want a positive integer", f[2])
		}
		tokens = append(tokens, n)
	}
	if tokens[1] <= tokens[0] {
		t.Errorf("tokens %v: want the second larger", tokens)
	}
}

func TestRunUsageErrors(t *testing.T) {
	const nodes = "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--nodes", nodes, "--", "true"}, "redlock run: --key is required"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes}, "redlock run: no command: give the command to run after --"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--"}, "redlock run: no command"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--ttl", "x", "--", "true"}, `redlock run: invalid value "x" for --ttl: want a duration`},
		{nil, []string{"run", "--key", "k", "--", "true"}, "redlock run: no masters: give --nodes or set REDLOCK_NODES"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--wait", "-1s", "--", "true"}, "--wait -1s"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--ttl", "1ms", "--", "true"}, "too short"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--quarantine", "5s", "--", "true"}, "--quarantine 5s is shorter than --ttl 10s"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--ttl", "2s", "--grace", "1500ms", "--", "true"}, "--grace 1.5s is more than half of --ttl 2s"},
		{nil, []string{"run", "--key", "redlock-fence:x", "--nodes", nodes, "--", "true"}, "--key: key \"redlock-fence:x\" starts with"},
		{nil, []string{"run", "--key", "k", "--nodes", "localhost", "--", "true"}, "missing port"},
		{[]string{nodesEnv + "=127.0.0.1:1,127.0.0.1:1"}, []string{"run", "--key", "k", "--", "true"}, "masters 1 and 2 are both 127.0.0.1:1"},
		{nil, []string{"run", "--key", "k", "--nodes", nodes, "--nope", "--", "true"}, "unknown flag: --nope"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := redlock(t, tc.env, tc.args...)
			checkUsage(t, r, tc.want)
		})
	}
}

// checkUsage checks a usage error: exit 2, one line saying want, the usage.
func checkUsage(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != exitUsage {
		t.Errorf("exit %d, want %d", r.code, exitUsage)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty: %q", r.stdout)
	}
	first, rest, _ := strings.Cut(r.stderr, "\n")
	if !strings.Contains(first, want) {
		t.Errorf("first stderr line %q does not say %q", first, want)
	}
	if !strings.HasPrefix(rest, "\nUsage:\n") {
		t.Errorf("stderr after the error line is not a blank line and the usage:\n%s", rest)
	}
}

func TestRunHelp(t *testing.T) {
	r := redlock(t, nil, "run", "--help")
	if r.code != 0 {
		t.Errorf("exit %d, want 0", r.code)
	}
	for _, want := range []string{"Examples:", "redlock run --key", "--wait", "--grace", "--quarantine", "--fencing",
		"REDLOCK_NODES", "REDLOCK_KEY", "REDLOCK_VALUE", "REDLOCK_TOKEN", "75 ", "76 ", "77 "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestRunInProcess runs a command under the lock as a function: nothing may
// be left running (engine, transports, signal forwarding, exec).
func TestRunInProcess(t *testing.T) {
	_, nodes := startMasters(t, 3)
	// The servers' own goroutines (redistest waits for each process) end in
	// its cleanup, after this check.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	o := defaultRunOptions()
	o.Key, o.Nodes, o.QuarantineSet, o.Command = "in-process", splitNodes(nodes), true, []string{"sh", "-c", "echo $REDLOCK_KEY; exit 4"}
	var stdout, stderr lockedBuffer
	o.Stdout, o.Stderr = &stdout, &stderr
	err := runCommand(context.Background(), o)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 4 || ee.err != nil {
		t.Errorf("runCommand: %v, want exit 4 and no message", err)
	}
	if stdout.String() != "in-process\n" || stderr.String() != "" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
