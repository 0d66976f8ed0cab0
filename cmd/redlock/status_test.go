package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redistest"
)

// startMasters starts n real masters and returns them and their --nodes
// value.
func startMasters(t *testing.T, n int) ([]*redistest.Server, string) {
	t.Helper()
	servers := redistest.Start(t, n)
	addrs := make([]string, n)
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	return servers, strings.Join(addrs, ",")
}

// decodeStatus parses s as exactly one status JSON object with every field.
func decodeStatus(t *testing.T, s string) statusReport {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var rep statusReport
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a status report: %v\n%s", err, s)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value on stdout (next: %v)\n%s", err, s)
	}
	var raw struct {
		Masters []map[string]any `json:"masters"`
		Quorum  any              `json:"quorum"`
		Healthy any              `json:"healthy"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil || raw.Quorum == nil || raw.Healthy == nil {
		t.Fatalf("stdout lacks quorum or healthy: %v\n%s", err, s)
	}
	for i, m := range raw.Masters {
		for _, k := range []string{"addr", "reachable", "rtt_ms", "run_id", "uptime_s", "quarantined", "error"} {
			if _, ok := m[k]; !ok {
				t.Errorf("masters[%d] lacks %q", i, k)
			}
		}
	}
	return rep
}

func TestStatus(t *testing.T) {
	servers, nodes := startMasters(t, 5)
	status := func(t *testing.T, env []string, args ...string) result {
		t.Helper()
		if env == nil {
			args = append([]string{"status", "--nodes", nodes}, args...)
		} else {
			args = append([]string{"status"}, args...)
		}
		return redlock(t, env, args...)
	}

	t.Run("up", func(t *testing.T) {
		r := status(t, nil, "--quarantine", "0")
		if r.code != 0 {
			t.Errorf("exit %d, want 0", r.code)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 7 || !strings.HasPrefix(lines[0], "MASTER") {
			t.Fatalf("want a header, 5 rows and the quorum line:\n%s", r.stdout)
		}
		for i, s := range servers {
			if f := strings.Fields(lines[i+1]); len(f) < 6 || f[0] != s.Addr || f[1] != "yes" || f[5] != "no" {
				t.Errorf("row %q: want %s reachable, not quarantined", lines[i+1], s.Addr)
			}
		}
		if want := "quorum: healthy: 5 of 5 masters can vote (reachable, writable and safe), 3 needed"; lines[6] != want {
			t.Errorf("last line %q, want %q", lines[6], want)
		}
	})
	t.Run("json", func(t *testing.T) {
		r := status(t, []string{nodesEnv + "=" + nodes}, "--json", "--quarantine", "0")
		if r.code != 0 || r.stderr != "" {
			t.Errorf("exit %d, stderr %q: want 0 and nothing", r.code, r.stderr)
		}
		rep := decodeStatus(t, r.stdout)
		if len(rep.Masters) != 5 || rep.Quorum != 3 || !rep.Healthy {
			t.Fatalf("%d masters, quorum %d, healthy %v: want 5, 3, true", len(rep.Masters), rep.Quorum, rep.Healthy)
		}
		for i, m := range rep.Masters {
			if m.Addr != servers[i].Addr || !m.Reachable || m.RTTMS <= 0 || len(m.RunID) != 40 || m.UptimeS < 0 || m.Quarantined || m.Error != "" {
				t.Errorf("master %d: %+v: want %s reachable with a run_id, not quarantined, no error", i, m, servers[i].Addr)
			}
		}
	})
	t.Run("quarantine", func(t *testing.T) {
		// Fresh masters are all in a quarantine of an hour.
		r := status(t, nil, "--json", "--quarantine", "1h")
		if r.code != exitFailure {
			t.Errorf("exit %d, want %d", r.code, exitFailure)
		}
		rep := decodeStatus(t, r.stdout)
		for i, m := range rep.Masters {
			if !m.Reachable || !m.Quarantined {
				t.Errorf("master %d: %+v: want reachable and quarantined", i, m)
			}
		}
		if rep.Healthy {
			t.Error("healthy with every master in quarantine")
		}
		r = status(t, nil, "--quarantine", "1h")
		if !strings.Contains(r.stdout, "yes, votes in ") || !strings.Contains(r.stdout, "quorum: NOT healthy: 0 of 5 masters can vote (reachable, writable, safe, and out of --quarantine 1h0m0s), 3 needed") {
			t.Errorf("table does not show the quarantine:\n%s", r.stdout)
		}
	})
	t.Run("two down", func(t *testing.T) {
		servers[3].Kill()
		servers[4].Kill()
		if r := status(t, nil, "--quarantine", "0"); r.code != 0 {
			t.Errorf("exit %d with 3 of 5 up, want 0", r.code)
		}
	})
	t.Run("three down", func(t *testing.T) {
		servers[2].Kill()
		r := status(t, nil, "--quarantine", "0")
		if r.code != exitFailure {
			t.Errorf("exit %d, want %d", r.code, exitFailure)
		}
		if !strings.Contains(r.stdout, "quorum: NOT healthy: 2 of 5 masters can vote") || !strings.Contains(r.stdout, "connection refused") {
			t.Errorf("table does not show the dead masters and the verdict:\n%s", r.stdout)
		}
		rep := decodeStatus(t, status(t, nil, "--quarantine", "0", "--json").stdout)
		for i, m := range rep.Masters {
			if down := i >= 2; m.Reachable == down || (m.Error != "") != down {
				t.Errorf("master %d: %+v: want reachable %v", i, m, !down)
			}
		}
		if rep.Healthy {
			t.Error("healthy with 3 of 5 masters down")
		}
	})
}

func TestStatusUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "redlock status: no masters: give --nodes or set REDLOCK_NODES"},
		{[]string{"status", "--nodes", "127.0.0.1:1", "extra"}, `unexpected argument "extra"`},
		{[]string{"status", "--nodes", "127.0.0.1:1", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"status", "--nodes", "127.0.0.1:1", "--quarantine", "soon"}, `invalid value "soon" for --quarantine`},
		{[]string{"status", "--nodes", "127.0.0.1:1", "--quarantine", "-1s"}, "--quarantine -1s"},
		{[]string{"status", "--nodes", "localhost"}, "missing port"},
		{[]string{"status", "--nodes", "127.0.0.1:1,127.0.0.1:1"}, "masters 1 and 2 are both 127.0.0.1:1"},
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
		})
	}
}

func TestStatusHelp(t *testing.T) {
	r := redlock(t, nil, "status", "--help")
	if r.code != 0 {
		t.Errorf("exit %d, want 0", r.code)
	}
	for _, want := range []string{"Examples:", "redlock status --nodes", "--json", "--quarantine", "REDLOCK_NODES"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestStatusInProcess checks masters as a function: nothing may be left
// running (connections, dials).
func TestStatusInProcess(t *testing.T) {
	servers, nodes := startMasters(t, 3)
	servers[2].Kill()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	o := defaultStatusOptions()
	o.Nodes, o.Quarantine = splitNodes(nodes+",127.0.0.1:1"), 0
	var out bytes.Buffer
	err := status(context.Background(), &out, o)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Errorf("status: %v, want exit %d (2 of 4 up, 3 needed)", err, exitFailure)
	}
	if !strings.Contains(out.String(), "quorum: NOT healthy: 2 of 4 masters can vote (reachable, writable and safe), 3 needed") {
		t.Errorf("report:\n%s", out.String())
	}
}
