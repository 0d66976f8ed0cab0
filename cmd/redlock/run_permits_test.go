//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunPermits starts more runs of one semaphore than it has permits, at
// once, over five real masters: every command runs, never more than
// --permits at a time, each on a slot key of the semaphore, and the
// commands on one slot do not overlap.
func TestRunPermits(t *testing.T) {
	_, nodes := startMasters(t, 5)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "intervals")
	const runs, permits = 5, 2
	procs := make([]*bgRedlock, runs)
	for i := range procs {
		procs[i] = startRedlock(t, []string{helperEnv + "=interval"}, "run", "--key", "builders", "--permits", fmt.Sprint(permits),
			"--nodes", nodes, "--quarantine", "0", "--wait", "60s", "--fencing", "--", self, out, "400ms")
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
		start, end int64
		key, value string
		token      int64
	}
	var ivs []interval
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var iv interval
		if _, err := fmt.Sscan(l, &iv.start, &iv.end, &iv.key, &iv.value, &iv.token); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		ivs = append(ivs, iv)
	}
	if len(ivs) != runs {
		t.Fatalf("%d commands ran, want %d:\n%s", len(ivs), runs, b)
	}
	slots := []string{"redlock-sem:{builders}:0", "redlock-sem:{builders}:1"}
	for _, iv := range ivs {
		if !slices.Contains(slots, iv.key) || iv.token < 1 {
			t.Errorf("REDLOCK_KEY %q, token %d: want a slot key of the semaphore (%v) and a token", iv.key, iv.token, slots)
		}
		at := 0 // commands running when this one started, itself included
		for _, o := range ivs {
			if o.start <= iv.start && iv.start < o.end {
				at++
			}
			if o != iv && o.key == iv.key && o.start < iv.end && iv.start < o.end {
				t.Errorf("two commands on slot %s overlapped", iv.key)
			}
		}
		if at > permits {
			t.Errorf("%d commands ran at once with --permits %d", at, permits)
		}
	}
}

// TestRunPermitsTaken: with every permit held, another run exits 75 (taken)
// without running its command, as run on a taken lock does; once a holder
// ends, a permit is free again.
func TestRunPermitsTaken(t *testing.T) {
	_, nodes := startMasters(t, 5)
	dir := t.TempDir()
	base := []string{"run", "--key", "pool", "--permits", "2", "--nodes", nodes, "--quarantine", "0"}
	var holders []*bgRedlock
	for i := range 2 {
		marker := filepath.Join(dir, fmt.Sprint("holding", i))
		h := startRedlock(t, nil, append(base, "--wait", "30s", "--", "sh", "-c", `echo $$ > "$0"; exec sleep 60`, marker)...)
		waitFile(t, marker, 1, h)
		holders = append(holders, h)
	}
	r := redlock(t, nil, append(base, "--wait", "0", "--", "sh", "-c", "echo ran")...)
	if r.code != exitNotAcquired || r.stdout != "" {
		t.Errorf("third copy: exit %d, stdout %q; want %d (taken) and no command run", r.code, r.stdout, exitNotAcquired)
	}
	if want := "all 2 permits are held"; !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr is not one line saying %q:\n%s", want, r.stderr)
	}
	if err := holders[0].cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	holders[0].wait(30 * time.Second)
	if r := redlock(t, nil, append(base, "--wait", "0", "--", "true")...); r.code != 0 {
		t.Errorf("after a holder ended: exit %d, want 0: its permit was not released", r.code)
	}
}

func TestRunPermitsUsage(t *testing.T) {
	const nodes = "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--permits", "-1"}, "--permits -1: want 1 to 256"},
		{[]string{"--permits", "257"}, "--permits 257: want 1 to 256"},
		{[]string{"--permits", "x"}, `invalid value "x" for --permits`},
		{[]string{"--permits", "200", "--key", strings.Repeat("k", 1010)}, "use a key at most 1006 bytes long"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"run", "--key", "k", "--nodes", nodes}, tc.args...)
			checkUsage(t, redlock(t, nil, append(args, "--", "true")...), tc.want)
		})
	}
}
