package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// halfMigrate leaves slot half moved from src to dst, as a reshard cut by
// a fault does: IMPORTING on dst, MIGRATING on src, every key still on src.
func halfMigrate(t *testing.T, c []*redistest.Server, src, dst, slot int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps := procs(c)
	if _, err := redisproc.BeginMigration(ctx, ps[src], ps[dst], slot); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockOnImportingNodeLeavesNoKey (ask21): a cluster whose lock key's
// slot is left half moved (a reshard cut by a fault: MIGRATING on the
// owner, IMPORTING on the target, no key moved; the fencing counter stays
// on the owner). An unfenced lock's SET reaches the target over ASK. A
// fenced contender of the same engine gets TRYAGAIN on that cluster for
// as long as the slot stays so (its counter is on the owner), wins on the
// other masters, and writes its token back to every master. Its ops on the
// cluster wait behind its stalled fenced acquire with the holder's Unlock,
// and all go in one batch: the holder's release (ASK from the owner), the
// contender's fenced acquire (TRYAGAIN) and its write-back (run by the
// owner, where the counter is). The holder's Unlock must still delete its
// key on the importing node.
func TestUnlockOnImportingNodeLeavesNoKey(t *testing.T) {
	c := redistest.StartCluster(t, 2)
	plain := redistest.Start(t, 2)
	const key = "torture:12"
	slot := rediscluster.Slot(key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := redisproc.SlotOwner(ctx, procs(c), slot)
	if err != nil {
		t.Fatal(err)
	}
	dst := 1 - src
	addrs := []string{clusterAddr(c), plain[0].Addr, plain[1].Addr}
	e, err := engine.New(addrs, api.WithoutRestartQuarantine(), api.WithTTL(20*time.Second), api.WithMasterTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	// The fencing counter lands on the owner before the slot starts to move.
	l, err := e.Lock(ctx, key, api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	halfMigrate(t, c, src, dst, slot)

	a, err := e.Lock(ctx, key, api.WithFencing(false))
	if err != nil {
		t.Fatalf("unfenced lock over ASK: %v", err)
	}
	if v, ok := c[dst].GetAsking(t, key); !ok || v != a.Value() {
		t.Fatalf("the holder's key on the importing node: %q %v, want %q", v, ok, a.Value())
	}

	tryAgains := func() int { return c[src].ErrorCount(t, "TRYAGAIN") + c[dst].ErrorCount(t, "TRYAGAIN") }
	before := tryAgains()
	type got struct {
		l   api.Lock
		err error
	}
	bc := make(chan got, 1)
	go func() {
		l, err := e.Lock(ctx, key, api.WithFencing(true))
		bc <- got{l, err}
	}()
	// The contender's first fenced acquire is stalled on the cluster
	// (TRYAGAIN, retried for up to 200ms); the other masters refused it.
	// The servers' counters are another process's: polled, within a bound.
	for tryAgains() == before {
		if ctx.Err() != nil {
			t.Fatal("the fenced contender never met TRYAGAIN on the half-moved slot: the test does not set up what it means to")
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("holder's Unlock: %v", err)
	}
	b := <-bc
	if b.err != nil {
		t.Fatalf("fenced contender: %v", b.err)
	}
	if v, ok := c[dst].GetAsking(t, key); ok && v == a.Value() {
		t.Fatalf("after the holder's Unlock returned nil, its key is still on the importing node %s (value %q): its release was not applied", c[dst].Addr, v)
	}
	if err := b.l.Unlock(ctx); err != nil {
		t.Logf("contender's Unlock: %v", err)
	}
	e.Close()
	for i, s := range c {
		if v, ok := s.GetAsking(t, key); ok {
			t.Errorf("key left on cluster node %d (%s) after Unlock and Close: %q", i, s.Addr, v)
		}
	}
	for i, s := range plain {
		if v, ok := s.Get(t, key); ok {
			t.Errorf("key left on master %d: %q", i+2, v)
		}
	}
}
