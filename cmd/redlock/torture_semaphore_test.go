package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/torture"
)

// TestTortureSemaphoreWorkload: mutex and semaphore clients together under
// every fault kind: both get permits and locks, and the checker, "never
// more than P holders" included, finds nothing.
func TestTortureSemaphoreWorkload(t *testing.T) {
	r := redlock(t, nil, "torture", "--duration", "15s", "--faults", strings.Join(torture.Kinds, ","),
		"--workloads", "mutex,semaphore", "--seed", "11", "--progress", "0", "--json")
	rep := decodeTorture(t, r.stdout)
	if r.code != 0 || rep.Violations.Count != 0 {
		t.Fatalf("exit %d, want 0; violations: %+v", r.code, rep.Violations)
	}
	var more struct {
		Workloads []string         `json:"workloads"`
		Held      map[string]int64 `json:"held"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &more); err != nil {
		t.Fatal(err)
	}
	if strings.Join(more.Workloads, ",") != "mutex,semaphore" {
		t.Errorf("report's workloads %v", more.Workloads)
	}
	if more.Held["short"] == 0 || more.Held["semaphore_short"] == 0 {
		t.Errorf("held %v: want short sections of both workloads", more.Held)
	}
}

func TestTortureWorkloadUsage(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"mutex,queue", `unknown workload "queue"`},
		{"semaphore,semaphore", `"semaphore" listed twice`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			r := redlock(t, nil, "torture", "--workloads", tc.arg)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d saying %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
}
