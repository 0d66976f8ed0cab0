//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
)

// TestRunStopsTheCommandBeforeTheLockEnds cuts one run off from a majority
// of the masters without closing its connections (its extensions hang, as
// behind a black hole), while a second run on the same key reaches every
// master directly and waits for the lock. The first command ignores SIGTERM
// and writes a timestamp every 20ms until it is killed. Every one of its
// timestamps must come before the second command starts: run must stop the
// command by the end of the lock's validity, not --grace after it.
func TestRunStopsTheCommandBeforeTheLockEnds(t *testing.T) {
	servers, direct := startMasters(t, 5)
	var cutOff []string
	var proxies []*faultproxy.Proxy
	for i, s := range servers {
		if i >= 3 {
			cutOff = append(cutOff, s.Addr)
			continue
		}
		p, err := faultproxy.New(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		cutOff = append(cutOff, p.Addr())
	}
	dir := t.TempDir()
	am, bm := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	a := startRedlock(t, nil, "run", "--key", "expiry", "--nodes", strings.Join(cutOff, ","), "--ttl", "2s", "--grace", "1s", "--quarantine", "0", "--",
		"sh", "-c", `trap "" TERM; while :; do date +%s%N >> "$0"; sleep 0.02; done`, am)
	waitFile(t, am, 1, a)
	for _, p := range proxies {
		p.Cut(time.Minute)
	}
	t.Cleanup(func() {
		for _, p := range proxies {
			p.Heal()
		}
	})
	b := startRedlock(t, nil, "run", "--key", "expiry", "--nodes", direct, "--ttl", "2s", "--quarantine", "0", "--wait", "20s", "--",
		"sh", "-c", `date +%s%N > "$0"`, bm)
	if r := b.wait(30 * time.Second); r.code != 0 {
		t.Fatalf("the second run: exit %d, want 0", r.code)
	}
	if r := a.wait(30 * time.Second); r.code != exitLost {
		t.Errorf("the cut-off run: exit %d, want %d (lost)", r.code, exitLost)
	}
	stamp := func(s string) time.Time {
		ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("timestamp %q: %v", s, err)
		}
		return time.Unix(0, ns)
	}
	bb, err := os.ReadFile(bm)
	if err != nil {
		t.Fatal(err)
	}
	bStart := stamp(string(bb))
	ab, err := os.ReadFile(am)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ab)), "\n")
	if aLast := stamp(lines[len(lines)-1]); !aLast.Before(bStart) {
		t.Fatalf("the cut-off command still ran %v after the second one started: it outlived its lock", aLast.Sub(bStart))
	}
}
