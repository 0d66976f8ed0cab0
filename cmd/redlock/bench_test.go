package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// decodeBench parses s as exactly one JSON object with the fields a bench
// report promises.
func decodeBench(t *testing.T, s string) benchReport {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var rep benchReport
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a bench report: %v\n%s", err, s)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value on stdout (next: %v)\n%s", err, s)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(s), &fields); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	for _, k := range []string{"cycles_per_sec", "p50_ms", "p99_ms", "acquired", "not_acquired", "errors", "allocs_per_cycle", "masters", "concurrency", "keys"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	return rep
}

// checkBench checks a run that should have gone well.
// loaded is the --master-timeout of runs that must count no errors: the
// default 100ms is a production figure, and on a loaded 2-core machine under
// -race a batch can wait longer than that in a master's queue (seen: "timed
// out waiting in the node's queue" with 256 lockers on memory masters).
const loaded = "5s"

func checkBench(t *testing.T, rep benchReport) {
	t.Helper()
	if rep.CyclesPerSec <= 0 || rep.Cycles <= 0 || rep.Acquired <= 0 {
		t.Errorf("%d cycles, %d acquired, %.1f/s: want some", rep.Cycles, rep.Acquired, rep.CyclesPerSec)
	}
	if rep.Errors != 0 {
		t.Errorf("%d errors (first: %s), want none", rep.Errors, rep.FirstError)
	}
	if rep.Cycles != rep.Acquired+rep.NotAcquired+rep.Errors {
		t.Errorf("%d cycles != %d acquired + %d not acquired + %d errors", rep.Cycles, rep.Acquired, rep.NotAcquired, rep.Errors)
	}
	if rep.P50MS <= 0 || rep.P99MS < rep.P50MS || rep.MaxMS < rep.P99MS {
		t.Errorf("latencies p50 %v, p99 %v, max %v ms: want 0 < p50 <= p99 <= max", rep.P50MS, rep.P99MS, rep.MaxMS)
	}
	if rep.AllocsPerCycle <= 0 {
		t.Errorf("allocs per cycle %v: want a measurement", rep.AllocsPerCycle)
	}
}

func TestBenchJSON(t *testing.T) {
	start := time.Now()
	r := redlock(t, nil, "bench", "--duration", "1s", "--json", "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	if r.stderr != "" {
		t.Errorf("stderr not empty (no progress bar without a terminal): %q", r.stderr)
	}
	rep := decodeBench(t, r.stdout)
	checkBench(t, rep)
	if rep.Backend != "memory" || rep.Masters != 5 || rep.Quorum != 3 || rep.Concurrency != 256 || rep.Keys != 0 {
		t.Errorf("%+v: want 5 memory masters, quorum 3, 256 lockers, fresh keys", rep)
	}
	if rep.NotAcquired != 0 {
		t.Errorf("%d fresh keys not acquired", rep.NotAcquired)
	}
	if rep.DurationMS < 900 || time.Since(start) > 30*time.Second {
		t.Errorf("ran %vms (the command %v) for --duration 1s", rep.DurationMS, time.Since(start))
	}
}

func TestBenchText(t *testing.T) {
	r := redlock(t, nil, "bench", "--duration", "300ms", "--concurrency", "16", "--keys", "4", "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	for _, want := range []string{"16 lockers on 4 shared keys (Lock + Unlock)", "5 embedded in-memory masters", "cycles", "latency p50", "p99", "allocs/cycle"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "first error") {
		t.Errorf("errors on embedded masters")
	}
}

// TestBenchSpawnRedis: --spawn-redis starts the servers, runs on them and
// stops them: afterwards nothing answers on their ports.
func TestBenchSpawnRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not on PATH (make test installs it): %v", err)
	}
	r := redlock(t, nil, "bench", "--spawn-redis", "3", "--duration", "500ms", "--concurrency", "32", "--json", "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	rep := decodeBench(t, r.stdout)
	checkBench(t, rep)
	if rep.Backend != "redis" || !rep.Spawned || rep.Masters != 3 || rep.Quorum != 2 || len(rep.Nodes) != 3 {
		t.Fatalf("%+v: want 3 spawned redis masters, quorum 2", rep)
	}
	for _, addr := range rep.Nodes {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after bench exited", addr)
		}
	}
}

func TestBenchNoRedisServer(t *testing.T) {
	empty := t.TempDir()
	r := redlock(t, []string{"PATH=" + empty}, "bench", "--spawn-redis", "3", "--duration", "100ms")
	if r.code != exitUsage {
		t.Errorf("exit %d, want %d", r.code, exitUsage)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty: %q", r.stdout)
	}
	line := strings.TrimSuffix(r.stderr, "\n")
	if strings.Contains(line, "\n") || !strings.Contains(line, "redis-server is not on PATH") {
		t.Errorf("stderr is not one line saying redis-server is missing:\n%s", r.stderr)
	}
}

func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	pngFile, svgFile := filepath.Join(dir, "bench.png"), filepath.Join(dir, "bench.svg")
	r := redlock(t, nil, "bench", "--duration", "500ms", "--concurrency", "64", "--keys", "16", "--json", "--plot", pngFile, "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	checkBench(t, decodeBench(t, r.stdout))
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", pngFile, err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("PNG is %dx%d: too small for two charts", b.Dx(), b.Dy())
	}

	r = redlock(t, nil, "bench", "--duration", "200ms", "--plot", svgFile, "--master-timeout", loaded)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	b, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("cycle latency")) || !bytes.Contains(b, []byte("throughput")) {
		t.Errorf("%s is not an SVG with both charts (%d bytes)", svgFile, len(b))
	}
	if !strings.Contains(r.stdout, "chart: "+svgFile) {
		t.Errorf("report does not name the chart:\n%s", r.stdout)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the one error line
	}{
		{[]string{"bench", "--concurrency", "0"}, "--concurrency 0"},
		{[]string{"bench", "--concurrency", "many"}, `invalid value "many" for --concurrency: want a whole number`},
		{[]string{"bench", "--keys", "-1"}, "--keys -1"},
		{[]string{"bench", "--duration", "0s"}, "--duration 0s"},
		{[]string{"bench", "--duration", "soon"}, `invalid value "soon" for --duration`},
		{[]string{"bench", "--ttl", "1ms"}, "too short"},
		{[]string{"bench", "--master-timeout", "0s"}, "--master-timeout 0s: want a positive duration"},
		{[]string{"bench", "--spawn-redis", "-1"}, "--spawn-redis -1"},
		{[]string{"bench", "--spawn-redis", "3", "--nodes", "a:6379"}, "exclude each other"},
		{[]string{"bench", "--plot", "chart.gif"}, ".png or .svg"},
		{[]string{"bench", "--nope"}, "unknown flag: --nope"},
		{[]string{"bench", "extra"}, `unexpected argument "extra"`},
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
			if !strings.HasPrefix(first, "redlock bench: ") || !strings.Contains(first, tc.want) {
				t.Errorf("first stderr line %q does not say %q", first, tc.want)
			}
			if !strings.HasPrefix(rest, "\nUsage:\n") {
				t.Errorf("stderr after the error line is not a blank line and the usage:\n%s", rest)
			}
		})
	}
}

func TestBenchBadNodes(t *testing.T) {
	r := redlock(t, []string{nodesEnv + "=localhost"}, "bench", "--duration", "100ms")
	if r.code != exitUsage {
		t.Errorf("exit %d, want %d", r.code, exitUsage)
	}
	if line := strings.TrimSuffix(r.stderr, "\n"); strings.Contains(line, "\n") || !strings.Contains(line, "missing port") {
		t.Errorf("stderr is not one line about the address's missing port:\n%s", r.stderr)
	}
}

// TestBenchInProcess runs bench as a function, contended, with a progress
// bar: it must leave no goroutine behind.
func TestBenchInProcess(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := defaultBenchOptions()
	o.Concurrency, o.Keys, o.Duration = 16, 4, 300*time.Millisecond
	var bar, out bytes.Buffer
	o.Progress = &bar
	o.JSON = true
	if err := runBenchCmd(context.Background(), &out, o); err != nil {
		t.Fatalf("bench: %v", err)
	}
	rep := decodeBench(t, out.String())
	checkBench(t, rep)
	if !strings.Contains(bar.String(), "cycles") {
		t.Errorf("the progress bar showed no cycles: %q", bar.String())
	}
}

// TestBenchInterrupt: Ctrl-C (the context ending) stops the run at once,
// says "interrupted" and stops the servers it started.
func TestBenchInterrupt(t *testing.T) {
	defer goleak.VerifyNone(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not on PATH (make test installs it): %v", err)
	}
	o := defaultBenchOptions()
	o.Spawn, o.Concurrency, o.Duration = 1, 8, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var addrs []string
	spawned := spawnHook
	spawnHook = func(a []string) { addrs = a; time.AfterFunc(300*time.Millisecond, cancel) }
	defer func() { spawnHook = spawned }()
	start := time.Now()
	err := runBenchCmd(ctx, io.Discard, o)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitInterrupted || ee.err.Error() != "interrupted" {
		t.Fatalf("%v, want exit %d \"interrupted\"", err, exitInterrupted)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if len(addrs) != 1 {
		t.Fatalf("spawned %v, want one server", addrs)
	}
	if c, err := net.DialTimeout("tcp", addrs[0], time.Second); err == nil {
		c.Close()
		t.Errorf("%s still answers after the interrupted run", addrs[0])
	}
}
