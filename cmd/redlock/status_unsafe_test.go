package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// redlock status says whether locks can be granted. Masters that answer
// PING and INFO but cannot hold a lock's key do not count: a replica (its
// keys follow its master's; a read-only one refuses every SET), a master
// that evicts keys under its memory limit, one full under noeviction (OOM),
// and one whose ACL user may not SET. With two of three such masters the
// quorum is not healthy, and each one's row says why. (Review redisops.)
func TestStatusCountsOnlyMastersThatCanHoldLocks(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, s, other *redistest.Server) string // the master's address for status
		want   string
	}{
		{"replica", func(t *testing.T, s, other *redistest.Server) string {
			s.Do(t, nil, "REPLICAOF", "127.0.0.1", strconv.Itoa(other.Port))
			return s.Addr
		}, "replica of"},
		{"evicting", func(t *testing.T, s, _ *redistest.Server) string {
			s.Do(t, nil, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
			s.Do(t, nil, "CONFIG", "SET", "maxmemory", "1gb")
			return s.Addr
		}, "maxmemory-policy allkeys-lru"},
		{"oom", func(t *testing.T, s, _ *redistest.Server) string {
			s.Do(t, nil, "CONFIG", "SET", "maxmemory", "1")
			return s.Addr
		}, "OOM"},
		{"noperm", func(t *testing.T, s, _ *redistest.Server) string {
			s.Do(t, nil, "ACL", "SETUSER", "ro", "on", ">pw", "~*", "+@all", "-set")
			return "redis://ro:pw@" + s.Addr
		}, "NOPERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := redistest.Start(t, 4)
			nodes := []string{c.break_(t, servers[0], servers[3]), c.break_(t, servers[1], servers[3]), servers[2].Addr}
			r := redlock(t, nil, "status", "--nodes", strings.Join(nodes, ","), "--quarantine", "0")
			if r.code == 0 || !strings.Contains(r.stdout, "NOT healthy") {
				t.Fatalf("status exit %d with two of three masters unable to hold a lock (%s):\n%s%s", r.code, c.name, r.stdout, r.stderr)
			}
			if n := strings.Count(r.stdout, c.want); n < 2 {
				t.Fatalf("status names %q %d times, want once for each of the two masters:\n%s", c.want, n, r.stdout)
			}
		})
	}
}
