package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
)

// TestStatusCluster: a Redis Cluster master gets one row, as a master, and
// its shards below it: reachable, slots owned (all 16384 between them),
// replicas and quarantine.
func TestStatusCluster(t *testing.T) {
	c := redistest.StartCluster(t, 2)
	addr := "redis+cluster://" + c[0].Addr + ";" + c[1].Addr
	r := redlock(t, nil, "status", "--nodes", addr, "--quarantine", "0")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"redis+cluster://" + c[0].Addr + "," + c[1].Addr + ": 2 shards, no replicas",
		"shard " + c[0].Addr + ": reachable yes, slots 8192, replicas 0, quarantined no",
		"shard " + c[1].Addr + ": reachable yes, slots 8192, replicas 0, quarantined no",
		"quorum: healthy: 1 of 1 masters can vote",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
	r = redlock(t, nil, "status", "--nodes", addr, "--quarantine", "1h", "--json")
	rep := decodeStatus(t, r.stdout)
	if r.code != 1 || len(rep.Masters) != 1 || len(rep.Masters[0].Shards) != 2 || !rep.Masters[0].Quarantined || !rep.Masters[0].Shards[1].Quarantined {
		t.Fatalf("exit %d, %+v: want the cluster and its shards quarantined, exit 1", r.code, rep)
	}

	c[1].Kill()
	r = redlock(t, nil, "status", "--nodes", addr, "--quarantine", "0")
	if r.code != 1 || !strings.Contains(r.stdout, "shard "+c[1].Addr+": reachable no") {
		t.Fatalf("exit %d with a shard down, want 1 and the shard unreachable:\n%s", r.code, r.stdout)
	}
}

// TestRunCluster: redlock run takes its lock over Redis Cluster masters
// and releases it.
func TestRunCluster(t *testing.T) {
	var nodes []string
	var all []*redistest.Server
	for range 3 {
		c := redistest.StartCluster(t, 2)
		all = append(all, c...)
		nodes = append(nodes, "redis+cluster://"+c[0].Addr+";"+c[1].Addr)
	}
	r := redlock(t, nil, "run", "--key", "cluster-run", "--nodes", strings.Join(nodes, ","), "--quarantine", "0", "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Fatalf("exit %d, want the command's 3:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range all {
		if s.DBSize(t) != 0 {
			t.Errorf("%s still holds %v", s.Addr, s.Keys(t, "*"))
		}
	}
}

// TestStatusClusterShardQuarantine: quarantine is per shard. A shard that
// restarted is shown in quarantine while the other is not, and the cluster
// says which share of its slots it does not vote for meanwhile.
func TestStatusClusterShardQuarantine(t *testing.T) {
	c := redistest.StartCluster(t, 2)
	addr := "redis+cluster://" + c[0].Addr + "," + c[1].Addr
	const q = "5s"
	// Both shards are new: wait for them to leave their first quarantine.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := redlock(t, nil, "status", "--nodes", addr, "--quarantine", q)
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never healthy:\n%s%s", r.stdout, r.stderr)
		}
	}
	c[1].Restart(t)
	if err := redisproc.WaitClusterOK(context.Background(), []*redisproc.Server{c[0].Server, c[1].Server}); err != nil {
		t.Fatal(err)
	}
	r := redlock(t, nil, "status", "--nodes", addr, "--quarantine", q)
	for _, want := range []string{
		"shard " + c[0].Addr + ": reachable yes, slots 8192, replicas 0, quarantined no",
		"shard " + c[1].Addr + ": reachable yes, slots 8192, replicas 0, quarantined yes",
		"no vote for the keys of 8192 of 16384 slots",
		"quorum: NOT healthy",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
}
