package main

import (
	"context"
	"encoding/json"
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

// TestStatusClusterProbesEveryShard: as for a single master, a cluster
// counts as a vote only if every shard can hold a lock's key: each shard
// is sent a probe key of its own slots (SET NX, then its release). A shard
// full under noeviction answers PING and INFO but refuses every SET (OOM),
// so the cluster cannot grant locks on the keys of its slots.
func TestStatusClusterProbesEveryShard(t *testing.T) {
	c := redistest.StartCluster(t, 2)
	c[1].Do(t, nil, "CONFIG", "SET", "maxmemory", "1")       // noeviction: every SET is OOM
	addr := "redis+cluster://" + c[0].Addr + ";" + c[1].Addr // one master, two seeds
	r := redlock(t, nil, "status", "--nodes", addr, "--quarantine", "0", "--json")
	var rep struct {
		Healthy bool
		Masters []struct {
			Votes    bool
			Writable *bool
			Shards   []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Masters) != 1 {
		t.Fatalf("exit %d, %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	m := rep.Masters[0]
	if r.code != 1 || rep.Healthy || m.Votes || m.Writable == nil || *m.Writable {
		t.Fatalf("exit %d, %+v: the cluster counted as a vote with shard %s refusing every SET (OOM); want it not writable, not voting, exit 1\n%s", r.code, m, c[1].Addr, r.stdout)
	}
	for _, sh := range m.Shards {
		full := sh["addr"] == c[1].Addr
		if sh["writable"] != !full || sh["votes"] != !full || full != strings.Contains(sh["error"].(string), "OOM") {
			t.Errorf("shard %v: writable %v, votes %v, error %q; want writable and voting %v, and an OOM error only if not", sh["addr"], sh["writable"], sh["votes"], sh["error"], !full)
		}
	}
	if n := c[0].DBSize(t); n != 0 {
		t.Errorf("the writable shard keeps %d keys after the probe: %v", n, c[0].Keys(t, "*"))
	}
	r = redlock(t, nil, "status", "--nodes", addr, "--quarantine", "0")
	if !strings.Contains(r.stdout, "shard "+c[1].Addr+": reachable yes") || !strings.Contains(r.stdout, "OOM") {
		t.Errorf("the table does not say shard %s refuses SET:\n%s", c[1].Addr, r.stdout)
	}
}
