package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// clusters starts n Redis Clusters of shards masters each, concurrently.
func clusters(t *testing.T, n, shards int) [][]*redistest.Server {
	t.Helper()
	cs := make([][]*redistest.Server, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { cs[i] = redistest.StartCluster(t, shards) })
	}
	wg.Wait()
	for _, c := range cs {
		if c == nil {
			t.FailNow()
		}
	}
	return cs
}

func clusterAddr(c []*redistest.Server) string {
	seeds := make([]string, len(c))
	for i, s := range c {
		seeds[i] = s.Addr
	}
	return "redis+cluster://" + strings.Join(seeds, ",")
}

func clusterEngine(t *testing.T, cs [][]*redistest.Server, opts ...api.Option) *engine.Engine {
	t.Helper()
	addrs := make([]string, len(cs))
	for i, c := range cs {
		addrs[i] = clusterAddr(c)
	}
	base := []api.Option{api.WithoutRestartQuarantine(), api.WithMasterTimeout(2 * time.Second)}
	e, err := engine.New(addrs, append(base, opts...)...)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// shardOf is the shard of a cluster started by redistest.StartCluster
// (shard i owns the i-th even range of slots) that owns key.
func shardOf(key string, shards int) int {
	s := rediscluster.Slot(key)
	for i := range shards {
		if lo, hi := redisproc.SlotRange(i, shards); s >= lo && s <= hi {
			return i
		}
	}
	return -1
}

// lockWithin retries Lock until it succeeds or d passes: the transports
// connect and read their slot maps in the background.
func clusterLockWithin(t *testing.T, e *engine.Engine, key string, d time.Duration, opts ...api.LockOption) api.Lock {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := e.Lock(ctx, key, opts...)
		cancel()
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lock(%q) within %v: %v", key, d, err)
		}
	}
}

// TestClusterMasters takes and releases locks over three clusters of three
// shards: keys on every shard, contended, fenced and multi-key in one slot;
// and nothing is left behind but fencing counters.
func TestClusterMasters(t *testing.T) {
	cs := clusters(t, 3, 3)
	e := clusterEngine(t, cs)
	clusterLockWithin(t, e, "warmup", 30*time.Second).Unlock(context.Background())

	var keys []string
	onShard := map[int]bool{}
	for i := 0; len(onShard) < 3 || len(keys) < 6; i++ {
		k := fmt.Sprintf("inv:%d", i)
		keys = append(keys, k)
		onShard[shardOf(k, 3)] = true
	}
	mutualExclusion(t, e, 24, 8, keys)

	ctx := context.Background()
	l1, err := e.Lock(ctx, "fenced:a", api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	tok := l1.Token()
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := e.Lock(ctx, "fenced:a", api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= tok {
		t.Fatalf("second fenced lock's token %d, first %d: want it larger", l2.Token(), tok)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		sh := shardOf("fenced:a", 3)
		var n string
		c[sh].Do(t, &n, "HGET", rediscluster.FenceKey("fenced:a"), "n")
		if n == "" {
			t.Fatalf("no counter %q on shard %d, the key's", rediscluster.FenceKey("fenced:a"), sh)
		}
	}

	if _, err := e.LockAll(ctx, []string{"a", "b"}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("LockAll over two slots: %v, want ErrInvalidArgument that says to use a hash tag", err)
	}
	if _, err := e.Lock(ctx, "x}y", api.WithFencing(true)); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("fenced lock on a key with '}' and no tag: %v, want ErrInvalidArgument", err)
	}
	la, err := e.LockAll(ctx, []string{"{order:1}:a", "{order:1}:b"})
	if err != nil {
		t.Fatalf("LockAll in one slot: %v", err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	for ci, c := range cs {
		for si, s := range c {
			for _, k := range s.Keys(t, "*") {
				if !strings.HasPrefix(k, "redlock-fence:") && !strings.HasPrefix(k, "redlock-fence{") {
					t.Errorf("cluster %d shard %d keeps %q", ci, si, k)
				}
			}
		}
	}
}

// shardRestart holds a lock on key, restarts (empty) the shard that owns
// key in two of the three clusters, and tries to take key again.
func shardRestart(t *testing.T, quarantine bool) error {
	cs := clusters(t, 3, 2)
	opt := api.WithoutRestartQuarantine()
	if quarantine {
		// The default ttl, 10s: the quarantine must cover it. The new
		// servers are quarantined too until they have been up for 10s.
		opt = api.WithRestartQuarantine(10 * time.Second)
	}
	e := clusterEngine(t, cs, opt)
	const key = "restart:k"
	held := clusterLockWithin(t, e, key, 40*time.Second)
	defer held.Unlock(context.Background())
	sh := shardOf(key, 2)
	for _, c := range cs[:2] {
		c[sh].Restart(t)
		if err := redisproc.WaitClusterOK(context.Background(), procs(c)); err != nil {
			t.Fatal(err)
		}
	}
	// The restarted shards' connections are new: a few attempts let the
	// engine see them and read their run ids.
	var last error
	for time.Until(held.Until()) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := e.TryLock(ctx, key)
		cancel()
		if err == nil {
			l.Unlock(context.Background())
			return nil
		}
		// The per-master answers are detail of ErrQuorumUnreachable.
		if errors.Is(err, api.ErrQuorumUnreachable) && strings.Count(err.Error(), api.ErrQuarantined.Error()) == 2 {
			return api.ErrQuarantined
		}
		last = err
	}
	return fmt.Errorf("neither granted nor quarantined while the first lock was valid; last: %w", last)
}

func procs(c []*redistest.Server) []*redisproc.Server {
	ps := make([]*redisproc.Server, len(c))
	for i, s := range c {
		ps[i] = s.Server
	}
	return ps
}

// TestClusterShardRestart: a shard that restarts empty must not vote for
// its slots' keys while its quarantine runs. The engine reads the cluster's
// run id as the set of its shards' run ids, so the cluster is quarantined.
func TestClusterShardRestart(t *testing.T) {
	err := shardRestart(t, true)
	if !errors.Is(err, api.ErrQuarantined) {
		t.Fatalf("second lock over two restarted shards: %v, want ErrQuorumUnreachable because of ErrQuarantined", err)
	}
}

// TestClusterShardRestartUnquarantined is the negative control: without
// the quarantine the emptied shards vote and a second holder gets in.
func TestClusterShardRestartUnquarantined(t *testing.T) {
	if err := shardRestart(t, false); err != nil {
		t.Fatalf("without quarantine the restarted shards should have let a second holder in: %v", err)
	}
}
