package memory

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/transport"
)

// stored counts map entries, expired or not.
func (m *Master) stored() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += s.m.n
		s.mu.Unlock()
	}
	return n
}

func fill(t *testing.T, c transport.Transport, prefix string, n int, ttl time.Duration) {
	t.Helper()
	ops := make([]transport.Op, n)
	for i := range ops {
		ops[i] = transport.Op{Kind: transport.Acquire, Key: fmt.Sprintf("%s%d", prefix, i), Value: "v", TTL: ttl}
	}
	res := make([]transport.Result, n)
	if err := c.Do(context.Background(), ops, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.OK {
			t.Fatalf("Acquire %s: %+v", ops[i].Key, r)
		}
	}
}

// TestSweep shows that expired keys nobody touches again are still removed,
// by the writes of other keys, without a background goroutine. In a synctest
// bubble, whose clock stands still while the fill runs, however long a loaded
// machine takes for it.
func TestSweep(t *testing.T) {
	synctest.Test(t, testSweep)
}

func testSweep(t *testing.T) {
	m := New()
	c := m.Transport()
	// The fill takes no time on the bubble's clock: all 10000 are stored.
	fill(t, c, "old", 10_000, 100*time.Millisecond)
	if n := m.stored(); n != 10_000 {
		t.Fatalf("stored %d entries, want 10000", n)
	}
	time.Sleep(100 * time.Millisecond) // fake time: all 10000 have expired
	// About 31 writes per shard: four sweeps of each shard, enough to
	// clear its ~156 expired entries while samples stay mostly expired.
	fill(t, c, "new", 2_000, time.Hour)
	if got, live := m.stored(), m.Len(); live != 2_000 || got > live+1_000 {
		t.Errorf("after 10000 keys expired and 2000 were written: %d entries stored, %d live; want 2000 live and at most 1000 expired left", got, live)
	}
}

// TestSweepBoundsGrowth writes only fresh short-lived keys, the pattern that
// would grow a map without active expiry forever. (In a bubble: "expired"
// must not depend on how long a fill takes.)
func TestSweepBoundsGrowth(t *testing.T) {
	synctest.Test(t, testSweepBoundsGrowth)
}

func testSweepBoundsGrowth(t *testing.T) {
	m := New()
	c := m.Transport()
	const batch, batches = 1_000, 50
	ttl := 2 * time.Millisecond
	maxStored := 0
	for b := range batches {
		fill(t, c, fmt.Sprintf("b%d:", b), batch, ttl)
		maxStored = max(maxStored, m.stored())
		time.Sleep(ttl) // fake time: everything but the last batch is expired from now on
	}
	// With lazy expiry alone all 50000 would still be stored.
	if maxStored > 5*batch {
		t.Errorf("stored up to %d entries while at most %d were live", maxStored, batch)
	}
	t.Logf("max stored %d entries, at most %d live", maxStored, batch)
}

func TestDeadlineSaturates(t *testing.T) {
	testDeadlineSaturates(t)
	// A bubble's clock is before the package's time base: now is negative.
	synctest.Test(t, testDeadlineSaturates)
}

func testDeadlineSaturates(t *testing.T) {
	m := New()
	c := m.Transport()
	res := make([]transport.Result, 1)
	op := transport.Op{Kind: transport.Acquire, Key: "k", Value: "v", TTL: time.Duration(1<<63-1) / time.Millisecond * time.Millisecond}
	if err := c.Do(context.Background(), []transport.Op{op}, res); err != nil || !res[0].OK {
		t.Fatalf("Acquire with the largest ttl: %v %+v", err, res[0])
	}
	if _, ok := m.Get("k"); !ok {
		t.Error("a key with the largest ttl expired at once: now+ttl overflowed")
	}
}
