package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	m := memory.New()
	transporttest.Run(t, func(t *testing.T) transport.Transport { return m.Transport() })
	// Every subtest frees what it holds or uses ttls of 10s at most, so some
	// keys are still live here; what matters is that the suite saw one master.
	if m.Len() == 0 {
		t.Error("the suite left no key at all on the master: were its clients on another master?")
	}
}

func do(t *testing.T, c transport.Transport, ops ...transport.Op) []transport.Result {
	t.Helper()
	res := make([]transport.Result, len(ops))
	if err := c.Do(context.Background(), ops, res); err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res
}

func acq(k, v string, ttl time.Duration) transport.Op {
	return transport.Op{Kind: transport.Acquire, Key: k, Value: v, TTL: ttl}
}

func rel(k, v string) transport.Op { return transport.Op{Kind: transport.Release, Key: k, Value: v} }

func info(t *testing.T, c transport.Transport) transport.ServerInfo {
	t.Helper()
	si, err := c.(transport.ServerReporter).ServerInfo(context.Background())
	if err != nil {
		t.Fatalf("ServerInfo: %v", err)
	}
	return si
}

func TestRestart(t *testing.T) {
	synctest.Test(t, testRestart)
}

func testRestart(t *testing.T) {
	m := memory.New()
	c := m.Transport()
	defer c.Close()
	do(t, c, acq("a", "1", time.Hour), acq("b", "1", time.Hour))
	time.Sleep(10 * time.Millisecond) // fake time: the uptime to see
	before := info(t, c)
	if len(before.RunID) != 40 {
		t.Errorf("RunID %q: want 40 hex digits like Redis's run_id", before.RunID)
	}
	if before.Uptime < 10*time.Millisecond {
		t.Errorf("Uptime %v, want at least the 10ms slept since New", before.Uptime)
	}

	m.Restart()

	after := info(t, c)
	if after.RunID == before.RunID || len(after.RunID) != 40 {
		t.Errorf("RunID after Restart = %q (before %q), want a new 40-hex id", after.RunID, before.RunID)
	}
	if after.Uptime >= before.Uptime {
		t.Errorf("Uptime after Restart = %v, want it to restart from 0 (was %v)", after.Uptime, before.Uptime)
	}
	if n := m.Len(); n != 0 {
		t.Errorf("Len after Restart = %d, want 0", n)
	}
	if r := do(t, c, acq("a", "2", time.Hour)); !r[0].OK {
		t.Error("Acquire of a key held before Restart failed: Restart did not forget it")
	}
}

func epoch(c transport.Transport) uint64 { return c.(transport.ServerReporter).Epoch() }

func TestRestartChangesEpoch(t *testing.T) {
	m := memory.New()
	c1, c2 := m.Transport(), m.Transport()
	e := epoch(c1)
	if epoch(c2) != e {
		t.Fatalf("two clients of one master: epochs %d and %d, want the same", e, epoch(c2))
	}
	do(t, c1, acq("a", "1", time.Hour), rel("a", "1"))
	if epoch(c1) != e {
		t.Fatalf("epoch moved from %d to %d without a restart", e, epoch(c1))
	}
	before := info(t, c1)
	m.Restart()
	e1, e2 := epoch(c1), epoch(c2)
	if e1 == e || e2 != e1 {
		t.Errorf("after Restart: epochs %d and %d (was %d), want both changed and equal", e1, e2, e)
	}
	if info(t, c2).RunID == before.RunID {
		t.Error("run id unchanged after the epoch changed")
	}
	m.Restart()
	if epoch(c1) == e1 {
		t.Error("a second Restart left the epoch as the first one set it")
	}
}

// TestRestartIsAtomic runs ops and ServerInfos against Restarts and checks
// the two orders the engine's quarantine relies on:
//   - an info read while the epoch stayed E describes E's run, so every
//     epoch has exactly one run id;
//   - a batch that finds a key forgotten by a Restart reads an epoch after
//     it that differs from the one read before the batch that set the key.
func TestRestartIsAtomic(t *testing.T) {
	m := memory.New()
	var stop atomic.Bool
	var ops atomic.Int64 // client iterations so far
	var wg sync.WaitGroup
	wg.Go(func() {
		defer stop.Store(true)
		for range 200 {
			m.Restart()
			// The clients run a few iterations in each epoch: paced by
			// their progress, not the clock, so that a loaded machine that
			// runs this goroutine alone for a while still interleaves them.
			for n := ops.Load(); ops.Load() < n+4 && !t.Failed(); {
				runtime.Gosched()
			}
		}
	})
	var (
		mu    sync.Mutex
		runOf = map[uint64]string{}
	)
	for g := range 4 {
		wg.Go(func() {
			c := m.Transport()
			k := fmt.Sprint("g", g)
			res := make([]transport.Result, 1)
			var setAt uint64 // epoch read before the Do that last set k
			for i := 0; !stop.Load() && !t.Failed(); i++ {
				ops.Add(1)
				e0 := epoch(c)
				si := info(t, c)
				e1 := epoch(c)
				if e0 == e1 {
					mu.Lock()
					if r, seen := runOf[e0]; seen && r != si.RunID {
						t.Errorf("epoch %d seen with run ids %s and %s", e0, r, si.RunID)
					}
					runOf[e0] = si.RunID
					mu.Unlock()
				}
				// k is never released: an Acquire succeeds the first time
				// and after a Restart forgot it, and only then.
				_ = c.Do(context.Background(), []transport.Op{acq(k, "v", time.Hour)}, res)
				after := epoch(c)
				if res[0].OK {
					if i > 0 && after == setAt {
						t.Errorf("found %s forgotten, but the epoch is still %d, as before the batch that set it", k, after)
					}
					setAt = e1
				}
			}
		})
	}
	wg.Wait()
	if len(runOf) < 10 {
		t.Errorf("only %d epochs observed: the test did not race against Restarts", len(runOf))
	}
}

// TestFenceOverlap runs issue 9's schedule, in which lock 2's token would
// come out below lock 1's, on five separate masters.
func TestFenceOverlap(t *testing.T) {
	var masters []transport.Transport
	for range 5 {
		c := memory.New().Transport()
		t.Cleanup(func() { _ = c.Close() })
		masters = append(masters, c)
	}
	transporttest.FenceOverlap(t, masters, []string{"k", "k", "k", "k", "k"})
}

func TestFencesForgottenOnRestart(t *testing.T) {
	m := memory.New()
	c := m.Transport()
	fenced := transport.Op{Kind: transport.AcquireFenced, Key: "k", Value: "v", TTL: time.Hour}
	r := do(t, c, fenced, rel("k", "v"), transport.Op{Kind: transport.RaiseFence, Key: "k", Value: "v", Token: 41})
	if r[0].Token != 1 || m.Fence("k") != 41 {
		t.Fatalf("token %d, counter %d; want 1 and 41", r[0].Token, m.Fence("k"))
	}
	if m.Len() != 0 {
		t.Errorf("Len = %d with only a fencing counter left, want 0: counters are not lock keys", m.Len())
	}
	m.Restart()
	if n := m.Fence("k"); n != 0 {
		t.Errorf("counter %d after Restart, want 0: a master without persistence forgets it", n)
	}
	if r := do(t, c, fenced); r[0].Token != 1 {
		t.Errorf("first grant after Restart: token %d, want 1", r[0].Token)
	}
}

// TestMultiKeyNoDeadlock runs multi-key ops over overlapping keys, listed in
// every order, from many goroutines, together with Restarts that take every
// shard: with the shards locked in a fixed order nothing can deadlock, and
// each op stays all or nothing.
func TestMultiKeyNoDeadlock(t *testing.T) {
	m := memory.New()
	keys := make([]string, 40) // enough to fall in many of the 64 shards
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	const workers = 8
	var ops atomic.Int64 // ops run so far
	var running atomic.Int32
	running.Store(workers)
	for g := range workers {
		wg.Go(func() {
			defer running.Add(-1)
			c := m.Transport()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			v := fmt.Sprint("v", g)
			for range 3000 {
				ops.Add(1)
				ks := make([]string, 2+rng.IntN(6))
				for i := range ks {
					ks[i] = keys[rng.IntN(len(keys))]
				}
				op := transport.Op{Key: ks[0], Keys: ks, Value: v, TTL: time.Minute}
				res := make([]transport.Result, 1)
				switch rng.IntN(3) {
				case 0:
					op.Kind = transport.Acquire
				case 1:
					op.Kind = transport.Extend
				default:
					op.Kind = transport.Release
				}
				e := epoch(c)
				_ = c.Do(context.Background(), []transport.Op{op}, res)
				if op.Kind == transport.Acquire && res[0].OK {
					// All or nothing: every key is ours now, unless a
					// Restart forgot them and someone else took them,
					// which a moved epoch tells.
					for _, k := range ks {
						if got, ok := m.Get(k); ok && got != v && epoch(c) == e {
							t.Errorf("after a successful multi Acquire by %s, %s is held by %s", v, k, got)
						}
					}
					_ = c.Do(context.Background(), []transport.Op{{Kind: transport.Release, Key: ks[0], Keys: ks, Value: v}}, res)
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			m.Restart()
			// Paced by the workers' progress, not the clock (see
			// TestRestartIsAtomic), until they are done.
			for n := ops.Load(); ops.Load() < n+workers && running.Load() > 0; {
				runtime.Gosched()
			}
		}
	})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("multi-key ops and Restarts did not finish within 30s: deadlock")
	}
}

func TestLenGetHonourExpiry(t *testing.T) {
	synctest.Test(t, testLenGetHonourExpiry)
}

func testLenGetHonourExpiry(t *testing.T) {
	m := memory.New()
	c := m.Transport()
	defer c.Close()
	do(t, c, acq("short", "s", 20*time.Millisecond), acq("long", "l", time.Hour))
	if v, ok := m.Get("short"); !ok || v != "s" {
		t.Errorf(`Get("short") = %q, %v; want "s", true`, v, ok)
	}
	if n := m.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	time.Sleep(20 * time.Millisecond) // fake time: exactly the short ttl
	if v, ok := m.Get("short"); ok {
		t.Errorf(`Get("short") after its ttl = %q, true; want absent`, v)
	}
	if v, ok := m.Get("long"); !ok || v != "l" {
		t.Errorf(`Get("long") = %q, %v; want "l", true`, v, ok)
	}
	if n := m.Len(); n != 1 {
		t.Errorf("Len after one key expired = %d, want 1", n)
	}
}

func TestNames(t *testing.T) {
	a, b := memory.New().Transport(), memory.New().Transport()
	na, nb := a.(transport.Namer).Name(), b.(transport.Namer).Name()
	if len(na) != len("memory-")+8 || na[:7] != "memory-" || na == nb {
		t.Errorf("generated names %q and %q: want distinct memory-<8 hex>", na, nb)
	}
	if got := memory.NewNamed("m3").Transport().(transport.Namer).Name(); got != "m3" {
		t.Errorf("NewNamed(m3) name = %q", got)
	}
	c := memory.NewNamed("m3").Transport()
	c.Close()
	if _, err := c.(transport.ServerReporter).ServerInfo(context.Background()); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("ServerInfo on a closed client = %v, want ErrClosed", err)
	}
}

// Clients of one master share keys, clients of different masters do not.
func TestMastersAreIndependent(t *testing.T) {
	m1, m2 := memory.New(), memory.New()
	c1, c2 := m1.Transport(), m2.Transport()
	do(t, c1, acq("k", "v", time.Hour))
	if r := do(t, c2, acq("k", "w", time.Hour)); !r[0].OK {
		t.Error("a key on one master blocked an Acquire on another")
	}
	if r := do(t, m1.Transport(), acq("k", "w", time.Hour)); r[0].OK {
		t.Error("a second client of the master did not see its key")
	}
}

func TestMismatchedResults(t *testing.T) {
	c := memory.New().Transport()
	res := make([]transport.Result, 1)
	err := c.Do(context.Background(), []transport.Op{acq("k", "v", time.Second), rel("k", "v")}, res)
	if err == nil || res[0].Err == nil {
		t.Errorf("Do with 2 ops and 1 result = %v (result %+v), want an error", err, res[0])
	}
}

// raceEnabled is set by race_test.go: the race detector instruments
// allocations, so allocation counts are only meaningful without it.
var raceEnabled bool

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	m := memory.New()
	c := m.Transport()
	ops, res := pairBatch("alloc", 64)
	ctx := context.Background()
	_ = c.Do(ctx, ops, res) // the first batch creates the map slots
	// Acquire of a free key and Release of a held one reuse the slots the
	// previous batch freed, so a steady lock workload allocates nothing.
	if n := testing.AllocsPerRun(1000, func() { _ = c.Do(ctx, ops, res) }); n != 0 {
		t.Errorf("Do(64 acquire + 64 release) allocates %v times per batch, want 0", n)
	}
	for i := range 64 {
		if !res[i].OK || !res[64+i].OK {
			t.Fatalf("op %d/%d did not succeed: %+v %+v", i, 64+i, res[i], res[64+i])
		}
	}
	ext := []transport.Op{acq("held", "v", time.Hour), {Kind: transport.Extend, Key: "held", Value: "v", TTL: time.Hour}}
	if n := testing.AllocsPerRun(1000, func() { _ = c.Do(ctx, ext, res[:2]) }); n != 0 {
		t.Errorf("Do(failed Acquire + Extend) allocates %v times per batch, want 0", n)
	}
	// The fenced ops, once the key's counter exists.
	fenced := []transport.Op{
		{Kind: transport.AcquireFenced, Key: "fenced", Value: "v", TTL: time.Hour},
		{Kind: transport.AcquireFenced, Key: "fenced", Value: "w", TTL: time.Hour},
		rel("fenced", "v"),
		{Kind: transport.RaiseFence, Key: "fenced", Value: "v", Token: 1},
	}
	_ = c.Do(ctx, fenced, res[:4])
	if n := testing.AllocsPerRun(1000, func() { _ = c.Do(ctx, fenced, res[:4]) }); n != 0 {
		t.Errorf("Do(fenced ops) allocates %v times per batch, want 0", n)
	}
	// The write-back of 1 is below the count by now: refused. (The
	// confirmed write-backs are BenchmarkDo/fenced's, at 0 allocs too.)
	if !res[0].OK || res[0].Token < 2 || res[1].OK || !res[2].OK || res[3].OK {
		t.Errorf("fenced batch: %+v", res[:4])
	}
	// And the multi-key ones: the shard set is a bitmask, not a slice.
	ks := []string{"m1", "m2", "m3", "m4", "m5"}
	multi := []transport.Op{
		{Kind: transport.Acquire, Key: ks[0], Keys: ks, Value: "v", TTL: time.Hour},
		{Kind: transport.Extend, Key: ks[0], Keys: ks, Value: "v", TTL: time.Hour},
		{Kind: transport.Release, Key: ks[0], Keys: ks, Value: "v"},
	}
	if n := testing.AllocsPerRun(1000, func() { _ = c.Do(ctx, multi, res[:3]) }); n != 0 {
		t.Errorf("Do(multi-key ops) allocates %v times per batch, want 0", n)
	}
	if !res[0].OK || !res[1].OK || !res[2].OK {
		t.Errorf("multi-key batch: %+v", res[:3])
	}
}

// pairBatch returns n Acquires of distinct keys followed by their Releases.
func pairBatch(prefix string, n int) ([]transport.Op, []transport.Result) {
	ops := make([]transport.Op, 0, 2*n)
	for i := range n {
		ops = append(ops, acq(fmt.Sprintf("%s:%d", prefix, i), "v", 10*time.Second))
	}
	for i := range n {
		ops = append(ops, rel(ops[i].Key, "v"))
	}
	return ops, make([]transport.Result, len(ops))
}

// BenchmarkDo measures one batch of 64 Acquires of free keys and their 64
// Releases, the shape of a busy node actor's pipeline.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		c := memory.New().Transport()
		ops, res := pairBatch("bench", 64)
		b.ReportAllocs()
		for b.Loop() {
			_ = c.Do(ctx, ops, res)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ops)), "ns/lockop")
	})
	b.Run("fenced", func(b *testing.B) {
		// The engine's shape for fenced locks: the AcquireFenceds, then
		// the write-backs of their tokens and the Releases.
		c := memory.New().Transport()
		const n = 64
		acqs := make([]transport.Op, n)
		rest := make([]transport.Op, 2*n)
		for i := range n {
			k := fmt.Sprint("fenced", i)
			acqs[i] = transport.Op{Kind: transport.AcquireFenced, Key: k, Value: "v", TTL: time.Minute}
			rest[i] = transport.Op{Kind: transport.RaiseFence, Key: k, Value: "v"}
			rest[n+i] = rel(k, "v")
		}
		res := make([]transport.Result, 2*n)
		b.ReportAllocs()
		for b.Loop() {
			_ = c.Do(ctx, acqs, res[:n])
			for i := range n {
				rest[i].Token = res[i].Token
			}
			_ = c.Do(ctx, rest, res)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*3*n), "ns/lockop")
	})
	b.Run("parallel", func(b *testing.B) {
		m := memory.New()
		var id atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c := m.Transport()
			ops, res := pairBatch(fmt.Sprint("bench", id.Add(1)), 64)
			for pb.Next() {
				_ = c.Do(ctx, ops, res)
			}
		})
	})
}

func ExampleMaster() {
	m := memory.NewNamed("example")
	c := m.Transport()
	defer c.Close()

	ops := []transport.Op{
		{Kind: transport.Acquire, Key: "lock:a", Value: "me", TTL: 10 * time.Second},
		{Kind: transport.Acquire, Key: "lock:a", Value: "you", TTL: 10 * time.Second},
		{Kind: transport.Release, Key: "lock:a", Value: "you"},
	}
	results := make([]transport.Result, len(ops))
	if err := c.Do(context.Background(), ops, results); err != nil {
		panic(err)
	}
	for i, r := range results {
		fmt.Println(ops[i].Kind, ops[i].Value, r.OK)
	}
	v, _ := m.Get("lock:a")
	fmt.Println("held by", v, "- live keys:", m.Len())
	// Output:
	// acquire me true
	// acquire you false
	// release you false
	// held by me - live keys: 1
}
