package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// bin is the redlock binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redlock-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "redlock")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	// GOFLAGS (an -overlay, say) reaches this build through the environment.
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool(), append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building redlock: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

type result struct {
	code           int
	stdout, stderr string
}

// redlock runs the binary as a person would, with env added to the
// environment (REDLOCK_NODES removed unless given).
func redlock(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, nodesEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if raceEnabled {
		// The race runtime otherwise sleeps a second before exiting.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("redlock %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("redlock %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

func TestDemoText(t *testing.T) {
	r := redlock(t, nil, "demo", "--buyers", "64", "--products", "4", "--stock", "50", "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	if r.stderr != "" {
		t.Errorf("stderr not empty: %q", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if got, want := lines[len(lines)-1], "with the lock: 0 oversold across 200 sales (5 masters, quorum 3)"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	var oversold []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "oversold" {
			oversold = f
		}
	}
	if oversold == nil || oversold[2] != "0" {
		t.Errorf("oversold row %q: want 0 in the locked column", oversold)
	}
}

func TestDemoJSON(t *testing.T) {
	const products, stock = 4, 50
	r := redlock(t, nil, "demo", "--buyers", "64", "--products", "4", "--stock", "50", "--json", "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	rep := decodeOne(t, r.stdout)
	checkReport(t, rep, products, stock)
	if rep.Masters != 5 || rep.Quorum != 3 || rep.Buyers != 64 || rep.Products != products || rep.Stock != stock {
		t.Errorf("header %+v: want 5 masters, quorum 3, 64 buyers, %d products of %d", rep, products, stock)
	}
}

// decodeOne parses s as exactly one JSON object, with no unknown fields.
func decodeOne(t *testing.T, s string) demoReport {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var rep demoReport
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, s)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value on stdout (next: %v)\n%s", err, s)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(s), &fields); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	for _, k := range []string{"masters", "quorum", "buyers", "products", "stock", "unlocked", "locked"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	for _, k := range []string{"sold", "oversold", "elapsed_ms", "cycles_per_sec", "p50_ms", "p99_ms", "errors"} {
		if _, ok := fields["locked"].(map[string]any)[k]; !ok {
			t.Errorf("JSON lacks locked.%s", k)
		}
	}
	return rep
}

// checkReport checks the accounting of both runs.
func checkReport(t *testing.T, rep demoReport, products, stock int) {
	t.Helper()
	had := int64(products * stock)
	l := rep.Locked
	if l.Oversold != 0 || l.Overlaps != 0 || l.Sold != had || l.InStock != 0 {
		t.Errorf("locked run: sold %d, in stock %d, oversold %d, overlaps %d; want %d sold, 0 left, 0 oversold, 0 overlaps",
			l.Sold, l.InStock, l.Oversold, l.Overlaps, had)
	}
	if l.Cycles < l.Sold || l.CyclesPerSec <= 0 || l.P50MS <= 0 || l.P99MS < l.P50MS || l.ElapsedMS <= 0 {
		t.Errorf("locked run: %d cycles, %.1f/s, p50 %vms, p99 %vms, %vms: want at least one cycle per sale and sane timings",
			l.Cycles, l.CyclesPerSec, l.P50MS, l.P99MS, l.ElapsedMS)
	}
	if l.Errors.total() != 0 {
		t.Errorf("locked run: lock errors %+v on embedded masters", l.Errors)
	}
	// Without the lock, lost updates sell items that never existed: what
	// was sold plus what is left exceeds what the shop had by exactly the
	// oversold count.
	u := rep.Unlocked
	if u.InStock < 0 || u.InStock > had || u.Sold < had-u.InStock || u.Oversold != u.Sold+u.InStock-had || u.ElapsedMS <= 0 {
		t.Errorf("unlocked run: sold %d, in stock %d, oversold %d of %d: accounting does not add up", u.Sold, u.InStock, u.Oversold, had)
	}
	if u.Oversold == 0 {
		t.Logf("note: the unlocked run happened not to oversell")
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the one error line
	}{
		{[]string{"demo", "--buyers", "x"}, `redlock demo: invalid value "x" for --buyers: want a whole number`},
		{[]string{"demo", "--nope"}, "redlock demo: unknown flag: --nope"},
		{[]string{"demo", "--buyers"}, "--buyers"},
		{[]string{"demo", "--buyers", "0"}, "--buyers 0"},
		{[]string{"demo", "--ttl", "soon"}, `invalid value "soon" for --ttl`},
		{[]string{"demo", "--ttl", "1ms"}, "too short"},
		{[]string{"demo", "--master-timeout", "0s"}, "--master-timeout 0s: want a positive duration"},
		{[]string{"demo", "--pick", "lifo"}, "round-robin or random"},
		{[]string{"demo", "--masters", "3", "--nodes", "a:6379"}, "exclude each other"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"dmeo"}, `redlock: unknown command "dmeo" for "redlock" (did you mean demo?)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := redlock(t, nil, tc.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d", r.code, exitUsage)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty: %q", r.stdout)
			}
			first, rest, _ := strings.Cut(r.stderr, "\n")
			if !strings.Contains(first, tc.want) {
				t.Errorf("first stderr line %q does not say %q", first, tc.want)
			}
			if !strings.HasPrefix(rest, "\nUsage:\n") {
				t.Errorf("stderr after the error line is not a blank line and the usage:\n%s", rest)
			}
			if strings.Contains(rest, "Error") || strings.Contains(rest, first) {
				t.Errorf("the error is printed more than once:\n%s", r.stderr)
			}
		})
	}
}

func TestBadNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"demo", "--nodes", "localhost"}},
		{"env", []string{nodesEnv + "=localhost"}, []string{"demo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := redlock(t, tc.env, tc.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d", r.code, exitUsage)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty: %q", r.stdout)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if strings.Contains(line, "\n") {
				t.Errorf("stderr is more than one line:\n%s", r.stderr)
			}
			if !strings.Contains(line, `"localhost"`) || !strings.Contains(line, "missing port") {
				t.Errorf("stderr %q does not say that the address \"localhost\" lacks its port", line)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	r := redlock(t, nil, "demo", "--help")
	if r.code != 0 {
		t.Errorf("exit %d, want 0", r.code)
	}
	for _, want := range []string{"Examples:", "redlock demo --nodes", "--buyers", "REDLOCK_NODES"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestInterrupt(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT on windows")
	}
	// A shop far too big to finish, interrupted once it is running.
	cmd := exec.Command(bin, "demo", "--products", "1", "--stock", "10000000", "--buyers", "64")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Not an order the result depends on once the handler is in: any moment
	// of the run is "running". A Go program catches SIGINT from its first
	// instruction (the runtime's handler), so /proc cannot tell when the
	// demo's own is installed, and the demo prints nothing until its end.
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("still running 10s after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, stderr.String())
	}
	if got := stderr.String(); got != "redlock demo: interrupted\n" {
		t.Errorf("stderr %q, want the one line %q", got, "redlock demo: interrupted")
	}
}

// TestDemoRedis runs the demo on five real redis-server masters, then with
// two of them down (a majority is left) and three down (none is).
func TestDemoRedis(t *testing.T) {
	servers := redistest.Start(t, 5)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	nodes := strings.Join(addrs, ",")
	// --ttl 2s: fresh masters sit out a restart quarantine of one TTL.
	shop := []string{"--buyers", "64", "--products", "4", "--stock", "50", "--ttl", "2s", "--json", "--master-timeout", loaded}

	check := func(t *testing.T, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
		rep := decodeOne(t, r.stdout)
		checkReport(t, rep, 4, 50)
		if rep.Backend != "redis" || rep.Masters != 5 || rep.Quorum != 3 {
			t.Errorf("backend %q, %d masters, quorum %d: want redis, 5, 3", rep.Backend, rep.Masters, rep.Quorum)
		}
	}
	t.Run("flag", func(t *testing.T) {
		check(t, redlock(t, nil, append([]string{"demo", "--nodes", nodes}, shop...)...))
	})
	t.Run("env", func(t *testing.T) {
		check(t, redlock(t, []string{nodesEnv + "=" + strings.ReplaceAll(nodes, ",", ", ")}, append([]string{"demo"}, shop...)...))
	})
	t.Run("two down", func(t *testing.T) {
		servers[3].Kill()
		servers[4].Kill()
		check(t, redlock(t, nil, append([]string{"demo", "--nodes", nodes}, shop...)...))
	})
	t.Run("three down", func(t *testing.T) {
		servers[2].Kill()
		r := redlock(t, nil, append([]string{"demo", "--nodes", nodes}, shop...)...)
		if r.code != exitUsage {
			t.Errorf("exit %d, want %d", r.code, exitUsage)
		}
		if want := "a majority (3 of 5) of the masters must be up"; !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("stderr is not one line saying %q:\n%s", want, r.stderr)
		}
		// A --timeout shorter than the first lock's wait ends the demo
		// there: the masters, not the shop's size, are what to fix.
		r = redlock(t, nil, append([]string{"demo", "--nodes", nodes, "--timeout", "1s"}, shop...)...)
		if r.code != exitFailure {
			t.Errorf("--timeout 1s: exit %d, want %d", r.code, exitFailure)
		}
		if want := "no lock within --timeout 1s: a majority (3 of 5) of the masters must be up"; !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("--timeout 1s: stderr is not one line saying %q:\n%s", want, r.stderr)
		}
	})
}
