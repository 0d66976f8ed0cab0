package torture

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClusterRun runs a short torture over five clusters of two shards
// with every cluster fault but client-pause, reshards and shard restarts
// included, and wants no violation.
func TestClusterRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ten redis-servers")
	}
	c := DefaultConfig()
	c.ClusterShards = 2
	// client-pause needs the redlock binary's worker (cmd/redlock's tests).
	c.Faults = slices.DeleteFunc(slices.Clone(ClusterKinds), func(k string) bool { return k == ClientPause })
	c.Duration = 15 * time.Second
	c.Seed = 3
	c.Engines, c.Clients, c.Keys = 2, 8, 8
	c.MasterTimeout = 200 * time.Millisecond
	c.FaultInterval = 300 * time.Millisecond
	rep, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("grants %d, faults %v, detail %v, lock errors %v", rep.Grants, rep.Faults, rep.FaultDetail, rep.LockErrors)
	if rep.Violations.Count != 0 {
		t.Fatalf("%d violations: %v", rep.Violations.Count, rep.Violations.List)
	}
	if rep.Grants == 0 || rep.Faults[Reshard] == 0 || rep.Faults[Kill] == 0 {
		t.Fatalf("grants %d, faults %v: the run did not exercise reshards and shard restarts", rep.Grants, rep.Faults)
	}
}

func TestValidateCluster(t *testing.T) {
	c := DefaultConfig()
	c.Faults = []string{Reshard}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--cluster-shards") {
		t.Errorf("reshard without clusters: %v", err)
	}
	c.ClusterShards = 2
	if err := c.Validate(); err != nil {
		t.Errorf("reshard over clusters: %v", err)
	}
	c.Faults = []string{Proxy, ScriptFlush, AddressFlip}
	if err := c.Validate(); err != nil {
		t.Errorf("proxy, script-flush and address-flip over clusters: %v", err)
	}
	c.Schedule = SplitBrain
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "only the mixed schedule") {
		t.Errorf("split-brain over clusters: %v", err)
	}
}
