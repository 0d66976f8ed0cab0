package redistest_test

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestStartCluster: three shards, each owning its third of the slots, and
// every node sees the cluster ok.
func TestStartCluster(t *testing.T) {
	s := redistest.StartCluster(t, 3)
	var slots []any
	s[0].Do(t, &slots, "CLUSTER", "SLOTS")
	if len(slots) != 3 {
		t.Fatalf("CLUSTER SLOTS lists %d ranges, want 3: %v", len(slots), slots)
	}
	for _, n := range s {
		var info string
		n.Do(t, &info, "CLUSTER", "INFO")
		if !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("%s: %s", n.Addr, info)
		}
	}
}
