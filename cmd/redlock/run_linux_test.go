package main

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// If run is killed outright, the kernel kills the command it started: a
// command must not go on after its lock can no longer be extended.
func TestRunKilledTakesCommandWithIt(t *testing.T) {
	_, nodes := startMasters(t, 5)
	marker := filepath.Join(t.TempDir(), "pid")
	p := startRedlock(t, nil, "run", "--key", "orphan", "--nodes", nodes, "--quarantine", "0", "--",
		"sh", "-c", `echo $$ > "$0"; exec sleep 30`, marker)
	lines := waitFile(t, marker, 1, p)
	pid, err := strconv.Atoi(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Kill(); err != nil { // run only, not its group
		t.Fatal(err)
	}
	p.wait(10 * time.Second)
	waitGone(t, pid)
}
