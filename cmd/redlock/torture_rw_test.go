package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/torture"
)

// TestTortureRWWorkload: mutex and read-write clients together under every
// fault kind: readers share keys, writers and plain locks get in, and the
// checker, "a writer overlaps no holder" included, finds nothing.
func TestTortureRWWorkload(t *testing.T) {
	r := redlock(t, nil, "torture", "--duration", "15s", "--faults", strings.Join(torture.Kinds, ","),
		"--workloads", "mutex,rw", "--seed", "11", "--progress", "0", "--json")
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
	if strings.Join(more.Workloads, ",") != "mutex,rw" {
		t.Errorf("report's workloads %v", more.Workloads)
	}
	for _, k := range []string{"short", "rw_reader_short", "rw_writer_short", "rw_lock_short", "rw_reader_shared"} {
		if more.Held[k] == 0 {
			t.Errorf("held %v: no %s", more.Held, k)
		}
	}
}

// TestTortureRWNegativeControl: the split brain of the restart-quarantine
// control, with read-write clients only: a writer is granted while a reader
// still holds, and the writer-overlap rule must report it (exit 1).
func TestTortureRWNegativeControl(t *testing.T) {
	r := redlock(t, nil, "torture", "--workloads", "rw", "--no-quarantine", "--schedule", "split-brain", "--duration", "10s",
		"--ttl", "5s", "--master-timeout", "1s", "--seed", "1", "--progress", "0", "--json")
	rep := decodeTorture(t, r.stdout)
	if rep.FaultDetail["kill.targeted"] == 0 {
		t.Fatalf("no majority kill during a long section in 10s (faults %v, %v): the split brain was never set up", rep.Faults, rep.FaultDetail)
	}
	if r.code != exitFailure || rep.Violations.ByKind["writer-overlap"] == 0 {
		t.Fatalf("exit %d, violations %+v: want %d with writer-overlap", r.code, rep.Violations.ByKind, exitFailure)
	}
}

func TestTortureRWWorkloadUsage(t *testing.T) {
	r := redlock(t, nil, "torture", "--workloads", "rw,rw")
	if r.code != exitUsage || !strings.Contains(r.stderr, `"rw" listed twice`) {
		t.Errorf("exit %d, stderr %q; want %d saying rw is listed twice", r.code, r.stderr, exitUsage)
	}
}
