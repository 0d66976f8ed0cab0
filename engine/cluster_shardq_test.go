package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// TestClusterShardQuarantineOtherShardsVote: restart quarantine is per
// shard. The shard that owns key restarts empty in clusters 0 and 1, and
// cluster 2 stops answering (silenceCluster), so every grant needs the
// votes of both restarted clusters. While the restarted shards are in
// quarantine, key is refused (they must not vote for their slots), yet a
// key on the other shard of the same clusters is granted: those shards
// never restarted, and their clusters' votes count for it.
func TestClusterShardQuarantineOtherShardsVote(t *testing.T) {
	cs := clusters(t, 3, 2)
	e := clusterEngine(t, cs, api.WithRestartQuarantine(15*time.Second))
	const key = "restart:k"
	sh := shardOf(key, 2)
	other := ""
	for i := 0; other == ""; i++ {
		if k := fmt.Sprintf("other:%d", i); shardOf(k, 2) != sh {
			other = k
		}
	}
	// Every shard is new: both keys wait for their shards' first period.
	clusterLockWithin(t, e, other, 60*time.Second).Unlock(context.Background())
	held := clusterLockWithin(t, e, key, 60*time.Second)
	defer held.Unlock(context.Background())

	for _, c := range cs[:2] {
		c[sh].Restart(t)
		if err := redisproc.WaitClusterOK(context.Background(), procs(c)); err != nil {
			t.Fatal(err)
		}
	}
	silenceCluster(cs[2])
	defer resumeCluster(cs[2]) // before the Unlocks, which wait for every master

	quarantined := func(when string) { refusedForQuarantine(t, e, held, key, when) }
	quarantined("after the restart")

	// The other shard of both restarted clusters votes all along.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	l, err := e.TryLock(ctx, other)
	cancel()
	if err != nil {
		t.Fatalf("%q, on the shards that did not restart, while the restarted shards are in quarantine: %v; want it granted by clusters 0 and 1", other, err)
	}
	for ci, c := range cs[:2] {
		if ks := c[1-sh].Keys(t, other); len(ks) != 1 {
			t.Errorf("cluster %d: %q not set on its shard %d", ci, other, 1-sh)
		}
	}
	// Still in quarantine after the grant: the grant fell within it.
	quarantined("after the other key's grant")
	resumeCluster(cs[2])
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// silenceCluster stops every server of c: their connections stay open and
// nothing is answered, so an op sent there waits for the master timeout.
// Killed instead, c refused at once, as the quarantined shards do, and an
// attempt was decided by the first two of three quick refusals: with one P
// nearly always the same two, one of them c's, and refusedForQuarantine
// never saw both restarted shards refuse (it failed every run at -cpu 1).
// Silent, c leaves the decision to the two restarted clusters.
func silenceCluster(c []*redistest.Server) {
	for _, s := range c {
		s.Pause()
	}
}

// resumeCluster undoes silenceCluster. An Unlock waits for every master,
// and for one that is silent, up to the lock's TTL (its silence limit):
// resumed, c answers what waited for it.
func resumeCluster(c []*redistest.Server) {
	for _, s := range c {
		s.Resume()
	}
}

// refusedForQuarantine waits (while held is valid) for key to be refused
// because both restarted shards (or their clusters) are in quarantine, and
// fails the test if key is granted meanwhile.
func refusedForQuarantine(t *testing.T, e *engine.Engine, held api.Lock, key, when string) {
	t.Helper()
	var last error
	for time.Until(held.Until()) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := e.TryLock(ctx, key)
		cancel()
		if err == nil {
			l.Unlock(context.Background())
			t.Fatalf("%s: %q granted while its holder's lock is valid and its shards restarted empty", when, key)
		}
		if errors.Is(err, api.ErrQuorumUnreachable) && strings.Count(err.Error(), api.ErrQuarantined.Error()) == 2 {
			return
		}
		last = err
	}
	t.Fatalf("%s: %q never refused for quarantine while the first lock was valid; last: %v", when, key, last)
}

// TestClusterShardQuarantineFollowsKeys: a loss travels with its slots.
// The shard that owns key restarts empty in clusters 0 and 1 (cluster 2
// stops answering), and then, while it is in quarantine, key's slot is
// moved to the other shard, which has been up for long. That shard must
// not grant key either until the restarted shard's quarantine ends: it
// took over the slot of a shard that had lost key.
func TestClusterShardQuarantineFollowsKeys(t *testing.T) {
	cs := clusters(t, 3, 2)
	e := clusterEngine(t, cs, api.WithRestartQuarantine(15*time.Second))
	const key = "restart:k"
	sh := shardOf(key, 2)
	held := clusterLockWithin(t, e, key, 60*time.Second)
	defer held.Unlock(context.Background())
	for _, c := range cs[:2] {
		c[sh].Restart(t)
		if err := redisproc.WaitClusterOK(context.Background(), procs(c)); err != nil {
			t.Fatal(err)
		}
	}
	silenceCluster(cs[2])
	defer resumeCluster(cs[2]) // before held's Unlock, which waits for every master
	refusedForQuarantine(t, e, held, key, "after the restart")

	// The slot moves, with no key to migrate: the restarted shard lost it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sl := fmt.Sprint(rediscluster.Slot(key))
	for _, c := range cs[:2] {
		src, dst := c[sh], c[1-sh]
		srcID, err := redisproc.NodeID(ctx, src.Server)
		if err != nil {
			t.Fatal(err)
		}
		dstID, err := redisproc.NodeID(ctx, dst.Server)
		if err != nil {
			t.Fatal(err)
		}
		dst.Do(t, nil, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID)
		src.Do(t, nil, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID)
		dst.Do(t, nil, "CLUSTER", "SETSLOT", sl, "NODE", dstID)
		src.Do(t, nil, "CLUSTER", "SETSLOT", sl, "NODE", dstID)
	}
	refusedForQuarantine(t, e, held, key, "after its slot moved to the other shard")
}
