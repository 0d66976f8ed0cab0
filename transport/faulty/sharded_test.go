package faulty

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// TestSharded: the sharded view of a wrapped cluster is a ShardReporter
// whose DoServed names the shard of each op, also for a batch held by a
// pause; a wrapped single server's is not one.
func TestSharded(t *testing.T) {
	if _, ok := Wrap(memory.NewNamed("m").Transport(), Config{}).Sharded().(transport.ShardReporter); ok {
		t.Fatal("the sharded view of a single server is a ShardReporter")
	}
	nodes := redistest.StartCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ct, err := rediscluster.Dial(ctx, rediscluster.Config{Seeds: []string{nodes[0].Addr, nodes[1].Addr}})
	if err != nil {
		t.Fatal(err)
	}
	w := Wrap(ct, Config{})
	defer w.Close()
	sr, ok := w.Sharded().(transport.ShardReporter)
	if !ok {
		t.Fatal("the sharded view of a cluster is no ShardReporter")
	}
	if _, ok := sr.(transport.ServerReporter); !ok {
		t.Fatal("the sharded view lost ServerReporter")
	}
	var keys [2]string // a key on each shard
	for i := 0; keys[0] == "" || keys[1] == ""; i++ {
		k := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		for sh := range 2 {
			if lo, hi := redisproc.SlotRange(sh, 2); rediscluster.Slot(k) >= lo && rediscluster.Slot(k) <= hi {
				keys[sh] = k
			}
		}
	}
	ops := []transport.Op{
		{Kind: transport.Acquire, Key: keys[0], Value: "v", TTL: time.Second},
		{Kind: transport.Acquire, Key: keys[1], Value: "v", TTL: time.Second},
	}
	check := func(res []transport.Result, served []transport.Served) {
		t.Helper()
		for i := range ops {
			if res[i].Err != nil {
				t.Fatalf("op %d: %v", i, res[i].Err)
			}
			if want := (transport.Served{Shard: nodes[i].Addr, Epoch: sr.ShardEpoch(nodes[i].Addr)}); served[i] != want {
				t.Errorf("op %d served by %+v, want %+v", i, served[i], want)
			}
		}
	}
	res, served := make([]transport.Result, 2), make([]transport.Served, 2)
	if err := sr.DoServed(ctx, ops, res, served); err != nil {
		t.Fatal(err)
	}
	check(res, served)

	// Held by a pause, then applied on Resume.
	w.Pause()
	res, served = make([]transport.Result, 2), make([]transport.Served, 2)
	for i := range ops {
		ops[i].Kind = transport.Release
	}
	var wg sync.WaitGroup
	wg.Go(func() { err = sr.DoServed(ctx, ops, res, served) })
	for w.Stats().Held == 0 {
		time.Sleep(time.Millisecond) // poll: holding a batch sends no event
	}
	w.Resume()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	check(res, served)
}
