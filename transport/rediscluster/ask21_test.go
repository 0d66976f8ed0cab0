package rediscluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// stuckHalfMoved gives key a fencing counter, then leaves its slot half
// moved, as a reshard cut by a fault does: IMPORTING on the other shard,
// MIGRATING on the owner, the counter still on the owner. It returns the
// importing node.
func stuckHalfMoved(t *testing.T, c *rediscluster.Transport, nodes []*redistest.Server, key string) *redistest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := make([]transport.Result, 2)
	if err := c.Do(ctx, []transport.Op{{Kind: transport.AcquireFenced, Key: key, Value: "first", TTL: time.Minute}, {Kind: transport.Release, Key: key, Value: "first"}}, res); err != nil || !res[0].OK || !res[1].OK {
		t.Fatalf("fenced acquire and release before the move: %+v, %v", res, err)
	}
	ps := procs(nodes)
	slot := rediscluster.Slot(key)
	src, err := redisproc.SlotOwner(ctx, ps, slot)
	if err != nil {
		t.Fatal(err)
	}
	dst := 1 - src
	if _, err := redisproc.BeginMigration(ctx, ps[src], ps[dst], slot); err != nil {
		t.Fatal(err)
	}
	return nodes[dst]
}

// TestReleaseOnImportingNode (ask21): on a slot left half moved, a lock
// key set over ASK lives on the importing node, while the fencing counter
// stays on the owner, so a fenced acquire meets TRYAGAIN on both and a
// write-back runs on the owner. A release of the key in one batch with
// either must still reach the key (ASK), in slice order: neither shares a
// key with it on the server (a write-back touches the counter alone; a
// fenced acquire that met TRYAGAIN ran nowhere).
func TestReleaseOnImportingNode(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	cases := []struct {
		name string
		key  string
		ops  func(key string) []transport.Op
		rel  int // the release's index in ops
	}{
		{"before a write-back", "ask21-raise", func(key string) []transport.Op {
			return []transport.Op{
				{Kind: transport.Release, Key: key, Value: "a"},
				{Kind: transport.RaiseFence, Key: key, Value: "b", Token: 100},
			}
		}, 0},
		{"after a fenced acquire that met TRYAGAIN", "ask21-tryagain", func(key string) []transport.Op {
			return []transport.Op{
				{Kind: transport.AcquireFenced, Key: key, Value: "b", TTL: time.Minute},
				{Kind: transport.Release, Key: key, Value: "a"},
			}
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := stuckHalfMoved(t, c, nodes, tc.key)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res := make([]transport.Result, 1)
			if err := c.Do(ctx, []transport.Op{{Kind: transport.Acquire, Key: tc.key, Value: "a", TTL: time.Minute}}, res); err != nil || !res[0].OK {
				t.Fatalf("acquire over ASK: %+v, %v", res, err)
			}
			if v, _ := dst.GetAsking(t, tc.key); v != "a" {
				t.Fatalf("the key on the importing node: %q, want \"a\"", v)
			}
			ops := tc.ops(tc.key)
			res = make([]transport.Result, len(ops))
			_ = c.Do(ctx, ops, res)
			if r := res[tc.rel]; r.Err != nil || !r.OK {
				t.Errorf("release: %+v, want it resent to the importing node and applied", r)
			}
			if v, ok := dst.GetAsking(t, tc.key); ok {
				t.Errorf("key %s still on the importing node after its release: %q", tc.key, v)
			}
		})
	}
}
