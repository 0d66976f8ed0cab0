//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunShared: runs with --shared share the key; a run without it (a
// writer) waits for them and they for it, with run's exit statuses: 75 when
// taken, the command's own otherwise; and a reader's lock is released when
// its command ends.
func TestRunShared(t *testing.T) {
	_, nodes := startMasters(t, 5)
	base := []string{"run", "--key", "catalog", "--nodes", nodes, "--quarantine", "0"}
	marker := filepath.Join(t.TempDir(), "reading")
	reader := startRedlock(t, nil, append(base, "--shared", "--",
		"sh", "-c", `echo $$ > "$0"; exec sleep 60`, marker)...)
	waitFile(t, marker, 1, reader)

	// A second reader runs while the first holds the key.
	if r := redlock(t, nil, append(base, "--shared", "--wait", "0", "--", "sh", "-c", `printf 'read %s' "$REDLOCK_TOKEN"`)...); r.code != 0 || r.stdout != "read " {
		t.Errorf("a second --shared run: exit %d, stdout %q, stderr %q; want 0, its command's output, no token", r.code, r.stdout, r.stderr)
	}
	// A writer does not.
	for _, wait := range []string{"0", "1s"} {
		r := redlock(t, nil, append(base, "--wait", wait, "--", "sh", "-c", "echo wrote")...)
		if r.code != exitNotAcquired || r.stdout != "" {
			t.Errorf("a writer under a reader, --wait %s: exit %d, stdout %q; want %d and no output", wait, r.code, r.stdout, exitNotAcquired)
		}
		if want := `not acquired: the lock "catalog" is taken`; !strings.Contains(r.stderr, want) {
			t.Errorf("--wait %s: stderr %q does not say %q", wait, r.stderr, want)
		}
	}
	// The reader's command ends: its lock goes with it.
	if err := reader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := reader.wait(30 * time.Second); r.code != 128+15 {
		t.Errorf("reader: exit %d after SIGTERM, want %d", r.code, 128+15)
	}
	marker = filepath.Join(t.TempDir(), "writing")
	writer := startRedlock(t, nil, append(base, "--wait", "0", "--",
		"sh", "-c", `echo $$ > "$0"; exec sleep 60`, marker)...)
	waitFile(t, marker, 1, writer)
	// A reader under the writer: taken; the command's own status otherwise.
	if r := redlock(t, nil, append(base, "--shared", "--wait", "0", "--", "sh", "-c", "echo read")...); r.code != exitNotAcquired || r.stdout != "" {
		t.Errorf("a reader under a writer: exit %d, stdout %q; want %d", r.code, r.stdout, exitNotAcquired)
	}
	if err := writer.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	writer.wait(30 * time.Second)
	if r := redlock(t, nil, append(base, "--shared", "--wait", "0", "--", "sh", "-c", "exit 3")...); r.code != 3 {
		t.Errorf("a reader whose command exits 3: exit %d, want 3", r.code)
	}
}

func TestRunSharedUsage(t *testing.T) {
	r := redlock(t, nil, "run", "--key", "k", "--nodes", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--shared", "--fencing", "--", "true")
	checkUsage(t, r, "--shared with --fencing")
}
