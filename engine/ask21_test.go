package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
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
	ccfg, err := rediscluster.ParseAddr(clusterAddr(c))
	if err != nil {
		t.Fatal(err)
	}
	ccfg.Node.OpTimeout = time.Second
	ct, err := rediscluster.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	onCluster := &fencedEntered{Transport: ct, key: key, entered: make(chan struct{}), granted: make(chan struct{})}
	ts := []transport.Transport{onCluster}
	for _, s := range plain {
		cfg, err := redis.ParseAddr(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OpTimeout = time.Second
		pt, err := redis.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, pt)
	}
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(20*time.Second), api.WithMasterTimeout(time.Second))
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
	// Lock returns once a majority granted: the two plain masters can
	// answer before the cluster, whose SET takes an ASK redirect, so wait
	// for the cluster's own grant.
	select {
	case <-onCluster.granted:
	case <-ctx.Done():
		t.Fatal("the cluster never granted the unfenced lock's SET")
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
	onCluster.armed.Store(true)
	go func() {
		l, err := e.Lock(ctx, key, api.WithFencing(true))
		bc <- got{l, err}
	}()
	// The contender's first fenced acquire is handed to the cluster's
	// transport, where it stalls (TRYAGAIN, retried for up to 200ms) and
	// holds the node's one batch in flight; the other masters refuse it.
	// The holder's Unlock goes now, so its release waits behind it.
	select {
	case <-onCluster.entered:
	case b := <-bc:
		t.Fatalf("the fenced contender ended (%v) before its acquire reached the cluster", b.err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("holder's Unlock: %v", err)
	}
	b := <-bc
	if b.err != nil {
		t.Fatalf("fenced contender: %v", b.err)
	}
	if tryAgains() == before {
		t.Fatal("the fenced contender never met TRYAGAIN on the half-moved slot: the test does not set up what it means to")
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

// fencedEntered is a cluster master's transport that closes entered as it
// is handed the first fenced acquire of key after armed is set.
type fencedEntered struct {
	*rediscluster.Transport
	key     string
	armed   atomic.Bool
	entered chan struct{}
	// granted is closed when an unfenced acquire of key has come back
	// granted from the cluster.
	granted   chan struct{}
	grantOnce sync.Once
}

func (f *fencedEntered) noteGrant(ops []transport.Op, res []transport.Result) {
	for i, op := range ops {
		if op.Kind == transport.Acquire && op.Key == f.key && res[i].OK {
			f.grantOnce.Do(func() { close(f.granted) })
		}
	}
}

func (f *fencedEntered) note(ops []transport.Op) {
	for _, op := range ops {
		if op.Kind == transport.AcquireFenced && op.Key == f.key && f.armed.CompareAndSwap(true, false) {
			close(f.entered)
		}
	}
}

func (f *fencedEntered) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	f.note(ops)
	err := f.Transport.Do(ctx, ops, res)
	f.noteGrant(ops, res)
	return err
}

func (f *fencedEntered) DoServed(ctx context.Context, ops []transport.Op, res []transport.Result, served []transport.Served) error {
	f.note(ops)
	err := f.Transport.DoServed(ctx, ops, res, served)
	f.noteGrant(ops, res)
	return err
}
