package rediscluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/rediscluster"
	"github.com/quorumlock/redlock/transport/transporttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// addr names a cluster by two of its nodes' addresses.
func addr(nodes []*redistest.Server) string {
	return "redis+cluster://" + nodes[0].Addr + "," + nodes[len(nodes)-1].Addr
}

func open(t *testing.T, nodes []*redistest.Server) *rediscluster.Transport {
	t.Helper()
	cfg, err := rediscluster.ParseAddr(addr(nodes))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rediscluster.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	transporttest.Run(t, func(t *testing.T) transport.Transport { return open(t, nodes) })
}

// owner returns the node that holds key, failing if not exactly one does.
func owner(t *testing.T, nodes []*redistest.Server, key string) int {
	t.Helper()
	at := -1
	for i, n := range nodes {
		var exists int
		err := n.TryDo(&exists, "EXISTS", key)
		if err != nil && !strings.Contains(err.Error(), "MOVED") {
			t.Fatal(err)
		}
		if err == nil && exists == 1 {
			if at >= 0 {
				t.Fatalf("%q on nodes %d and %d", key, at, i)
			}
			at = i
		}
	}
	return at
}

func slotOwner(t *testing.T, nodes []*redistest.Server, key string) int {
	t.Helper()
	for i, n := range nodes {
		var s int
		n.Do(t, &s, "CLUSTER", "KEYSLOT", key)
		if s != rediscluster.Slot(key) {
			t.Fatalf("Slot(%q) = %d, redis says %d", key, rediscluster.Slot(key), s)
		}
		var count int
		n.Do(t, &count, "CLUSTER", "COUNTKEYSINSLOT", fmt.Sprint(s))
		_ = count
		var nodesOut string
		n.Do(t, &nodesOut, "CLUSTER", "NODES")
		for line := range strings.Lines(nodesOut) {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				var l, h int
				fmt.Sscan(lo, &l)
				fmt.Sscan(hi, &h)
				if s >= l && s <= h {
					return i
				}
			}
		}
	}
	t.Fatalf("no node owns the slot of %q", key)
	return -1
}

// TestBatchAcrossShards sends one batch whose keys span every shard, with
// ops of one key in order (acquire, release, acquire), and checks that each
// key lives on the shard that owns its slot, with the fencing counters
// beside their keys.
func TestBatchAcrossShards(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	c := open(t, nodes)
	var ops []transport.Op
	for i := range 30 {
		k := fmt.Sprintf("across:%d", i)
		ops = append(ops,
			transport.Op{Kind: transport.Acquire, Key: k, Value: "v1", TTL: 10 * time.Second},
			transport.Op{Kind: transport.Release, Key: k, Value: "v1"},
			transport.Op{Kind: transport.AcquireFenced, Key: k, Value: "v2", TTL: 10 * time.Second},
		)
	}
	res := make([]transport.Result, len(ops))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, ops, res); err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for i := 0; i < len(ops); i += 3 {
		k := ops[i].Key
		for j := range 3 {
			if !res[i+j].OK || res[i+j].Err != nil {
				t.Fatalf("%s %q: %+v", ops[i+j].Kind, k, res[i+j])
			}
		}
		if res[i+2].Token != 1 {
			t.Fatalf("%q: token %d, want 1", k, res[i+2].Token)
		}
		want := slotOwner(t, nodes, k)
		if got := owner(t, nodes, k); got != want {
			t.Fatalf("%q on node %d, its slot's owner is %d", k, got, want)
		}
		fk := rediscluster.FenceKey(k)
		if fk != "redlock-fence{"+k+"}" || rediscluster.Slot(fk) != rediscluster.Slot(k) {
			t.Fatalf("FenceKey(%q) = %q, slot %d, key's slot %d", k, fk, rediscluster.Slot(fk), rediscluster.Slot(k))
		}
		if got := owner(t, nodes, fk); got != want {
			t.Fatalf("counter %q on node %d, key's owner is %d", fk, got, want)
		}
		used[want] = true
	}
	if len(used) != 3 {
		t.Fatalf("keys landed on %d shards, want all 3", len(used))
	}
}

func TestFenceKeyTagged(t *testing.T) {
	for _, k := range []string{"{order:42}", "{order:42}:a", "x{tag}y", "a{b", "plain"} {
		fk := rediscluster.FenceKey(k)
		if rediscluster.Slot(fk) != rediscluster.Slot(k) {
			t.Errorf("FenceKey(%q) = %q in slot %d, key in %d", k, fk, rediscluster.Slot(fk), rediscluster.Slot(k))
		}
	}
	// A tagged key keeps the single-server counter name: counters made
	// before a move to a cluster are found again.
	if got := rediscluster.FenceKey("{order:42}"); got != transport.FenceKey("{order:42}") {
		t.Errorf("FenceKey of a tagged key = %q, want %q", got, transport.FenceKey("{order:42}"))
	}
	if err := rediscluster.CheckFence("a}b"); err == nil {
		t.Error("CheckFence(a}b) = nil: its counter cannot share its slot")
	}
	// A key and the same key in braces are two locks with two counters.
	if rediscluster.FenceKey("k") == rediscluster.FenceKey("{k}") {
		t.Errorf("FenceKey(k) = FenceKey({k}) = %q", rediscluster.FenceKey("k"))
	}
	if err := rediscluster.CheckKeys([]string{rediscluster.FenceKey("k")}, false); err == nil {
		t.Errorf("a lock key named like a counter, %q, is accepted", rediscluster.FenceKey("k"))
	}
}

func TestCrossSlotRefused(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	keys := []string{"a", "b"} // slots 15495 and 3300
	if rediscluster.Slot("a") == rediscluster.Slot("b") {
		t.Fatal("test keys share a slot")
	}
	ops := []transport.Op{
		{Kind: transport.Acquire, Key: "a", Keys: keys, Value: "v", TTL: time.Second},
		{Kind: transport.Acquire, Key: "{t}a", Keys: []string{"{t}a", "{t}b"}, Value: "v", TTL: time.Second},
		{Kind: transport.Release, Key: "{t}a", Keys: []string{"{t}a", "{t}b"}, Value: "v"},
	}
	res := make([]transport.Result, len(ops))
	if err := c.Do(context.Background(), ops, res); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, transport.ErrInvalidOp) || !errors.Is(res[0].Err, rediscluster.ErrCrossSlot) || !strings.Contains(res[0].Err.Error(), "hash tag") {
		t.Fatalf("cross-slot acquire: %v, want ErrInvalidOp and ErrCrossSlot naming hash tags", res[0].Err)
	}
	if !res[1].OK || !res[2].OK {
		t.Fatalf("one-tag multi-key acquire, release: %+v %+v", res[1], res[2])
	}
	for _, n := range nodes {
		if n.DBSize(t) != 0 {
			t.Fatalf("%s keeps %v", n.Addr, n.Keys(t, "*"))
		}
	}
}

func TestParseAddr(t *testing.T) {
	cfg, err := rediscluster.ParseAddr("rediss+cluster://u:p%40ss@h1:7000,h2,[::1]:7002?allow-failover=true")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Node.TLS || cfg.Node.Username != "u" || cfg.Node.Password != "p@ss" || !cfg.AllowFailover ||
		strings.Join(cfg.Seeds, " ") != "h1:7000 h2:6379 [::1]:7002" {
		t.Fatalf("%+v", cfg)
	}
	for _, bad := range []string{
		"redis+cluster://", "redis+cluster://h1:7000/2", "redis+cluster://h1:7000,,h2:1",
		"redis+cluster://h1:7000?x=1", "redis+cluster://u:secret@h1:notaport", "redis://h1:7000",
		"redis+cluster://h:1?allow-failover=maybe",
	} {
		_, err := rediscluster.ParseAddr(bad)
		if err == nil {
			t.Errorf("ParseAddr(%q) = nil error", bad)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseAddr(%q) quotes the password: %v", bad, err)
		}
	}
}

// TestReplicasRefused: a cluster whose master has a replica answers every op
// with ErrFailoverRisk unless allow-failover is given.
func TestReplicasRefused(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := redisproc.AddReplica(ctx, procs(nodes), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Stop)
	op := []transport.Op{{Kind: transport.Acquire, Key: "k", Value: "v", TTL: time.Second}}
	for _, allow := range []bool{false, true} {
		cfg, err := rediscluster.ParseAddr(addr(nodes) + map[bool]string{false: "", true: "?allow-failover=true"}[allow])
		if err != nil {
			t.Fatal(err)
		}
		c, err := rediscluster.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The replica shows in the slot map once it has synced: poll.
		for {
			shards, _ := c.Shards(ctx)
			reps := 0
			for _, s := range shards {
				reps += s.Replicas
			}
			if reps > 0 || ctx.Err() != nil {
				break
			}
			c.Close()
			if c, err = rediscluster.New(cfg); err != nil {
				t.Fatal(err)
			}
		}
		res := make([]transport.Result, 1)
		_ = c.Do(ctx, op, res)
		rel := []transport.Op{{Kind: transport.Release, Key: "k", Value: "v"}}
		_ = c.Do(ctx, rel, make([]transport.Result, 1))
		c.Close()
		if allow {
			if !res[0].OK {
				t.Fatalf("with allow-failover: %+v, want granted", res[0])
			}
		} else if !errors.Is(res[0].Err, rediscluster.ErrFailoverRisk) {
			t.Fatalf("without allow-failover: %+v, want ErrFailoverRisk", res[0])
		}
	}
}

func procs(c []*redistest.Server) []*redisproc.Server {
	ps := make([]*redisproc.Server, len(c))
	for i, s := range c {
		ps[i] = s.Server
	}
	return ps
}

// TestSlotMatchesRadix checks Slot against radix's (and so Redis's) on keys
// with and without hash tags; TestBatchAcrossShards checks it against
// CLUSTER KEYSLOT.
func TestSlotMatchesRadix(t *testing.T) {
	for _, k := range []string{"", "a", "b", "foo", "{user1000}.following", "{}x", "x{}{y}", "a{b", "a}b{c}", "123456789", strings.Repeat("k", 300)} {
		if got, want := rediscluster.Slot(k), int(radix.ClusterSlot([]byte(k))); got != want {
			t.Errorf("Slot(%q) = %d, radix says %d", k, got, want)
		}
	}
	if rediscluster.Slot("123456789") != 0x31C3%16384 {
		t.Errorf("CRC16 check value: Slot(123456789) = %d", rediscluster.Slot("123456789"))
	}
	if n := testing.AllocsPerRun(100, func() { rediscluster.Slot("redlock-bench:a-long-key-beyond-32-bytes:12345") }); n != 0 {
		t.Errorf("Slot allocates %v times", n)
	}
}

// TestRedirects moves a key's slot under a transport that has the old slot
// map: while the slot is half moved, an acquire of a key the source lacks
// follows ASK to the target, and one of a key the source still has is
// answered "held" by the source; once moved, MOVED is followed. DoServed
// names, for each op, the shard that answered it last: the target for an
// op redirected there (the shard the engine's quarantine must vet).
func TestRedirects(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held, fresh := "{r}:held", "{r}:fresh"
	slot := rediscluster.Slot(held)
	var served []transport.Served
	do := func(ops ...transport.Op) []transport.Result {
		res := make([]transport.Result, len(ops))
		served = make([]transport.Served, len(ops))
		if err := c.DoServed(ctx, ops, res, served); err != nil {
			t.Fatal(err)
		}
		return res
	}
	// servedBy checks that op i was served by node k, in the epoch its
	// connection has now.
	servedBy := func(i, k int) {
		t.Helper()
		if want := (transport.Served{Shard: nodes[k].Addr, Epoch: c.ShardEpoch(nodes[k].Addr)}); served[i] != want {
			t.Errorf("op %d served by %+v, want %+v", i, served[i], want)
		}
	}
	acq := func(k, v string) transport.Op {
		return transport.Op{Kind: transport.Acquire, Key: k, Value: v, TTL: 10 * time.Second}
	}
	if r := do(acq(held, "a")); !r[0].OK {
		t.Fatalf("first acquire: %+v", r[0])
	}
	ps := procs(nodes)
	src, err := redisproc.SlotOwner(ctx, ps, slot)
	if err != nil {
		t.Fatal(err)
	}
	dst := 1 - src
	srcID, _ := redisproc.NodeID(ctx, ps[src])
	dstID, _ := redisproc.NodeID(ctx, ps[dst])
	sl := fmt.Sprint(slot)
	nodes[dst].Do(t, nil, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID)
	nodes[src].Do(t, nil, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID)

	r := do(acq(held, "b"), acq(fresh, "b"))
	if r[0].OK || r[0].Err != nil {
		t.Fatalf("acquire of a key the source holds, mid-migration: %+v, want a plain no", r[0])
	}
	if !r[1].OK {
		t.Fatalf("acquire of a fresh key, mid-migration: %+v, want granted by the target", r[1])
	}
	servedBy(0, src)
	servedBy(1, dst)
	// Read with ASKING: the target does not own the slot yet.
	conn := nodes[dst].Client(t)
	var v string
	if err := conn.Do(ctx, radix.Cmd(nil, "ASKING")); err != nil {
		t.Fatal(err)
	}
	if err := conn.Do(ctx, radix.Cmd(&v, "GET", fresh)); err != nil || v != "b" {
		t.Fatalf("the fresh key on the target: %q, %v; want b", v, err)
	}
	if _, a := c.Redirects(); a == 0 {
		t.Fatal("no op followed ASK")
	}
	// Finish the move: the held key goes over, and the slot with it.
	nodes[src].Do(t, nil, "MIGRATE", "127.0.0.1", fmt.Sprint(nodes[dst].Port), "", "0", "5000", "KEYS", held)
	for _, n := range []int{dst, src} {
		nodes[n].Do(t, nil, "CLUSTER", "SETSLOT", sl, "NODE", dstID)
	}
	r = do(acq(held, "c"), transport.Op{Kind: transport.Release, Key: held, Value: "a"}, transport.Op{Kind: transport.Release, Key: fresh, Value: "b"})
	if r[0].OK || r[0].Err != nil || !r[1].OK || !r[2].OK {
		t.Fatalf("after the move: %+v, want held refused, both released", r)
	}
	for i := range r {
		servedBy(i, dst)
	}
	if m, _ := c.Redirects(); m == 0 {
		t.Fatal("no op followed MOVED")
	}
}

// TestShardRestartMovesEpoch: a shard restarted (empty) changes the
// cluster's epoch once the transport reconnects, and its run id; per shard
// (transport.ShardReporter), its own epoch and run id change and the other
// shard's do not.
func TestShardRestartMovesEpoch(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e0 := c.Epoch()
	si0, err := c.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := c.ShardNames(); len(names) != 2 || !slices.Contains(names, nodes[0].Addr) || !slices.Contains(names, nodes[1].Addr) {
		t.Fatalf("ShardNames %v, want both nodes", names)
	}
	var shardE0 [2]uint64
	var shardID0 [2]string
	for i, n := range nodes {
		shardE0[i] = c.ShardEpoch(n.Addr)
		si, err := c.ShardInfo(ctx, n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		shardID0[i] = si.RunID
	}
	nodes[1].Restart(t)
	if err := redisproc.WaitClusterOK(ctx, procs(nodes)); err != nil {
		t.Fatal(err)
	}
	// A key of the restarted shard's slots: its old connection breaks on
	// the next use, and the transport reconnects in the background.
	key := "k"
	for i := 0; ; i++ {
		key = fmt.Sprintf("k%d", i)
		if lo, hi := redisproc.SlotRange(1, 2); rediscluster.Slot(key) >= lo && rediscluster.Slot(key) <= hi {
			break
		}
	}
	for c.Epoch() == e0 {
		res := make([]transport.Result, 1)
		_ = c.Do(ctx, []transport.Op{{Kind: transport.Release, Key: key, Value: "v"}}, res)
		if ctx.Err() != nil {
			t.Fatal("the epoch never moved after a shard restart")
		}
	}
	si1, err := c.ServerInfo(ctx)
	for err != nil && ctx.Err() == nil {
		si1, err = c.ServerInfo(ctx)
	}
	if si1.RunID == si0.RunID {
		t.Fatalf("the cluster's run id %q did not change with a shard's restart", si1.RunID)
	}
	if si1.Uptime > 2*time.Second {
		t.Fatalf("uptime %v: want the restarted shard's, the least", si1.Uptime)
	}
	for i, n := range nodes {
		si, err := c.ShardInfo(ctx, n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if moved, restarted := c.ShardEpoch(n.Addr) != shardE0[i], si.RunID != shardID0[i]; moved != (i == 1) || restarted != (i == 1) {
			t.Errorf("shard %d: epoch moved %v, run id changed %v; want both only for the restarted shard, 1", i, moved, restarted)
		}
	}
}

// TestEvictedPerShard: each shard's evicted_keys comes in its ShardInfo,
// and the cluster's ServerInfo has their sum, so that a count that moves
// on any shard moves the cluster's (the engine reads a change as keys
// dropped).
func TestEvictedPerShard(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Keys on both shards, then shard 0 evicts all of its own.
	var ops []transport.Op
	for i := range 8 {
		ops = append(ops, transport.Op{Kind: transport.Acquire, Key: fmt.Sprintf("k%d", i), Value: "v", TTL: time.Minute})
	}
	res := make([]transport.Result, len(ops))
	if err := c.Do(ctx, ops, res); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"maxmemory-policy", "allkeys-lru"}, {"maxmemory", "1"}, {"maxmemory", "0"}, {"maxmemory-policy", "noeviction"}} {
		nodes[0].Do(t, nil, "CONFIG", "SET", cmd[0], cmd[1])
	}
	want := [2]string{nodes[0].Info(t, "stats", "evicted_keys"), "0"}
	if want[0] == "0" {
		t.Fatal("shard 0 evicted nothing")
	}
	var sum uint64
	for i, n := range nodes {
		si, err := c.ShardInfo(ctx, n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(si.Evicted); got != want[i] {
			t.Errorf("shard %d: Evicted %s, want its evicted_keys %s", i, got, want[i])
		}
		sum += si.Evicted
	}
	if si, err := c.ServerInfo(ctx); err != nil || si.Evicted != sum {
		t.Errorf("the cluster's ServerInfo: %+v, %v; want Evicted %d, the shards' sum", si, err, sum)
	}
}
