package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// lifoCalls makes reuse deterministic for the test: GetCall hands back the
// Call put last (sync.Pool promises nothing of the kind, and drops some under
// the race detector). Each recycled Call is also sent on the channel.
func lifoCalls(t *testing.T) <-chan *Call {
	t.Helper()
	var mu sync.Mutex
	var free []*Call
	put := make(chan *Call, 64)
	oldGet, oldPut := getCall, putCall
	getCall = func() *Call {
		mu.Lock()
		defer mu.Unlock()
		if n := len(free); n > 0 {
			c := free[n-1]
			free = free[:n-1]
			return c
		}
		return new(Call)
	}
	putCall = func(c *Call) {
		mu.Lock()
		free = append(free, c)
		mu.Unlock()
		put <- c
	}
	t.Cleanup(func() { getCall, putCall = oldGet, oldPut })
	return put
}

// holding wraps a memory master: a batch with an op on a gated key (of the
// gated kind, if one is given) waits for that key's gate, whatever its
// context says (the master timeout of these tests is far away), after
// reporting the key on arrived; each op's answer is reported on answered.
type holding struct {
	transport.Transport
	mu       sync.Mutex
	hold     map[string]gate
	arrived  chan string // the keys of the gates batches wait at
	answered chan string // the keys of the ops answered, in order
}

type gate struct {
	kind transport.OpKind // 0: any
	ch   chan struct{}
}

func newHolding(m *memory.Master) *holding {
	return &holding{Transport: m.Transport(), hold: map[string]gate{}, arrived: make(chan string, 64), answered: make(chan string, 4096)}
}

func (h *holding) gate(key string) (open func()) { return h.gateKind(key, 0) }

func (h *holding) gateKind(key string, kind transport.OpKind) (open func()) {
	g := gate{kind: kind, ch: make(chan struct{})}
	h.mu.Lock()
	h.hold[key] = g
	h.mu.Unlock()
	return sync.OnceFunc(func() { close(g.ch) })
}

func (h *holding) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		h.mu.Lock()
		g, ok := h.hold[op.Key]
		h.mu.Unlock()
		if ok && (g.kind == 0 || g.kind == op.Kind) {
			h.arrived <- op.Key
			<-g.ch
		}
	}
	err := h.Transport.Do(ctx, ops, res)
	for _, op := range ops {
		h.answered <- op.Key
	}
	return err
}

// waitAnswered waits until h has answered an op on key.
func waitAnswered(t *testing.T, h *holding, key string) { t.Helper(); waitOn(t, h.answered, key) }

// waitArrived waits until a batch of h waits at key's gate.
func waitArrived(t *testing.T, h *holding, key string) { t.Helper(); waitOn(t, h.arrived, key) }

func waitOn(t *testing.T, ch <-chan string, key string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-ch:
			if k == key {
				return
			}
		case <-timeout:
			t.Fatalf("nothing on %q", key)
		}
	}
}

func holdingCluster(t *testing.T, n, shards int) (*Cluster, []*memory.Master, []*holding) {
	t.Helper()
	ms := make([]*memory.Master, n)
	hs := make([]*holding, n)
	ts := make([]transport.Transport, n)
	names := make([]string, n)
	for i := range ms {
		ms[i] = memory.New()
		hs[i] = newHolding(ms[i])
		ts[i] = hs[i]
		names[i] = fmt.Sprintf("m%d", i)
	}
	// A master timeout far beyond the test: held batches answer late, never
	// time out, and no timer of the engine's decides anything here.
	c, err := Start(Config{Transports: ts, Names: names, MasterTimeout: time.Minute, MaxBatch: 64, MaxInFlight: 1, Coordinators: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, ms, hs
}

// keyIn returns a key of the given shard.
func keyIn(c *Cluster, prefix string, shard int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s%d", prefix, i); c.ShardOf(k) == shard {
			return k
		}
	}
}

// hold takes key on master m for another client, directly.
func hold(t *testing.T, m *memory.Master, key string) {
	t.Helper()
	direct(t, m, transport.Acquire, key)
}

// unhold releases what hold took.
func unhold(t *testing.T, m *memory.Master, key string) {
	t.Helper()
	direct(t, m, transport.Release, key)
}

func direct(t *testing.T, m *memory.Master, kind transport.OpKind, key string) {
	t.Helper()
	res := make([]transport.Result, 1)
	if err := m.Transport().Do(context.Background(), []transport.Op{{Kind: kind, Key: key, Value: "someone-else", TTL: time.Minute}}, res); err != nil || !res[0].OK {
		t.Fatalf("%v %s: %v %+v", kind, key, err, res[0])
	}
}

func tryCall(key, value string) *Call {
	call := GetCall(Acquire, "trylock", key, value, time.Minute, time.Millisecond)
	call.Retry = api.DefaultOptions().Retry
	call.Retry.MaxAttempts = 1
	return call
}

// wait waits for call's result; a pooled Call without a done channel is
// waited for with Wait, which is what the engine does for a context that
// never ends.
func wait(t *testing.T, call *Call) error {
	t.Helper()
	done := call.Done()
	if done == nil {
		ch := make(chan struct{})
		go func() { call.Wait(); close(ch) }()
		done = ch
	}
	select {
	case <-done:
		return call.Err
	case <-time.After(10 * time.Second):
		t.Fatal("call never finished")
		return nil
	}
}

// A late grant from a slow master, for a Call's first lifetime (key a, in
// shard 0), must not count toward its next lifetime (key b, in shard 1), even
// though both lifetimes' attempts have the same seq (each coordinator numbers
// its own). Without the generation check, shard 0 counts the late grant of a
// as b's second grant and reports b won, while the masters m0 and m2, a
// majority, hold b for someone else.
func TestLateReplyAfterReuseInAnotherShard(t *testing.T) {
	reused := lifoCalls(t)
	c, ms, hs := holdingCluster(t, 3, 2)
	a, b := keyIn(c, "a", 0), keyIn(c, "b", 1)
	hold(t, ms[0], b)
	hold(t, ms[2], b)

	// First lifetime: a wins on m1 and m2; m0's grant is held back.
	openA := hs[0].gate(a)
	defer openA()
	x := tryCall(a, "value-of-a")
	if err := c.Submit(x); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, x); err != nil {
		t.Fatalf("a: %v", err)
	}
	x.Release()
	if got := <-reused; got != x {
		t.Fatal("another Call was recycled")
	}

	// Second lifetime: the same Call tries b. m2's answer is held, so b
	// cannot be decided by refusals until it comes; only a grant decides.
	openB := hs[2].gate(b)
	defer openB()
	y := tryCall(b, "value-of-b")
	if y != x {
		t.Fatal("the pool did not hand back the Call just recycled")
	}
	if err := c.Submit(y); err != nil {
		t.Fatal(err)
	}
	// m0 now answers a's SET (late: a grant for the first lifetime), then
	// b's (a refusal: b is someone else's there).
	openA()
	waitAnswered(t, hs[0], b)
	openB()
	err := wait(t, y)
	if !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("b, held by someone else on m0 and m2: got %v, want ErrNotAcquired (a stale grant of a's lifetime was counted)", err)
	}
	y.Release()
}

// A late reply to a cleanup release of a Call's first lifetime must not count
// as the release of its next lifetime, in the same shard: cleanup replies are
// matched by the attempt count (leftovers.gen), which starts at 1 in every
// lifetime, not by the coordinator's seq. Without the generation check the
// stale reply clears the new lifetime's mark on m0, and the TryLock reports
// its failure while its own release on m0 has not been answered (its key may
// still be there: "no key left after a failed attempt" is then false).
//
// It runs in a synctest bubble so that the test can free a on m1 and m2
// between two attempts: an attempt that came between the two frees got one
// grant and one refusal and waited for m0, whose queue is behind the held
// release, for the whole master timeout (correct, and the test hung).
func TestLateCleanupReplyAfterReuseInSameShard(t *testing.T) {
	reused := lifoCalls(t)
	synctest.Test(t, func(t *testing.T) { testLateCleanupReplyAfterReuseInSameShard(t, reused) })
}

func testLateCleanupReplyAfterReuseInSameShard(t *testing.T, reused <-chan *Call) {
	c, ms, hs := holdingCluster(t, 3, 1)
	a, b := keyIn(c, "a", 0), keyIn(c, "b", 0)
	hold(t, ms[1], a)
	hold(t, ms[2], a)
	hold(t, ms[1], b)
	hold(t, ms[2], b)

	// First lifetime: a is taken on m1 and m2, so attempt 1 fails and its
	// cleanup release to m0 (generation 1) is held there. Attempts go on
	// until the test frees a; one of them wins.
	openRelA := hs[0].gateKind(a, transport.Release)
	defer openRelA()
	x := GetCall(Acquire, "lock", a, "value-of-a", time.Minute, time.Millisecond)
	x.Retry = api.DefaultOptions().Retry
	x.Retry.InitialInterval, x.Retry.MaxInterval, x.Retry.MaxAttempts = time.Millisecond, time.Millisecond, 0
	if err := c.Submit(x); err != nil {
		t.Fatal(err)
	}
	waitArrived(t, hs[0], a)
	// Every attempt so far failed on m1's and m2's refusals; once the
	// bubble is idle, the call waits for its next retry, none is out.
	synctest.Wait()
	unhold(t, ms[1], a)
	unhold(t, ms[2], a)
	if err := wait(t, x); err != nil {
		t.Fatalf("a: %v", err)
	}
	x.Release()
	if got := <-reused; got != x {
		t.Fatal("another Call was recycled")
	}

	// Second lifetime: the same Call tries b once; it fails on m1 and m2
	// and releases b everywhere (generation 1 again), m0's behind the
	// held batch, then held at b's gate.
	openB := hs[0].gate(b)
	defer openB()
	y := tryCall(b, "value-of-b")
	y.MakeDone() // to look at it below without waiting
	if y != x {
		t.Fatal("the pool did not hand back the Call just recycled")
	}
	if err := c.Submit(y); err != nil {
		t.Fatal(err)
	}
	// m1 and m2 answer the release (the failure is decided before it).
	waitAnswered(t, hs[1], b)
	waitAnswered(t, hs[2], b)
	waitAnswered(t, hs[1], b)
	waitAnswered(t, hs[2], b)

	// The late reply: m0 answers a's release of generation 1, then takes
	// the next batch (b's ops) and waits at b's gate.
	openRelA()
	waitArrived(t, hs[0], b)
	// Once the bubble is idle, the coordinator has handled the stale
	// reply (the node delivers a batch's replies before it sends the next).
	synctest.Wait()
	select {
	case <-y.Done():
		t.Fatalf("b's TryLock finished (%v) before m0 answered its release: a stale cleanup reply of a's lifetime was counted", y.Err)
	default:
	}
	openB()
	if err := wait(t, y); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("b: got %v, want ErrNotAcquired", err)
	}
	y.Release()
}

// A Call used inside a testing/synctest bubble is reused outside it, and
// back: the WaitGroup that signals its result must leave the bubble with
// its count (a done channel made in the bubble killed the process when used
// outside it: "select on synctest channel from outside bubble").
func TestReusedCallCrossesSynctestBubbles(t *testing.T) {
	reused := lifoCalls(t)
	memoryCluster := func(t *testing.T) *Cluster {
		ts := []transport.Transport{memory.New().Transport(), memory.New().Transport(), memory.New().Transport()}
		return start(t, ts, time.Second, 1)
	}
	lockOnce := func(t *testing.T, c *Cluster, key string) *Call {
		call := tryCall(key, "value-of-"+key)
		if err := c.Submit(call); err != nil {
			t.Fatal(err)
		}
		call.Wait()
		if call.Err != nil {
			t.Fatalf("%s: %v", key, call.Err)
		}
		call.Release()
		if got := <-reused; got != call {
			t.Fatal("another Call was recycled")
		}
		return call
	}
	var first *Call
	synctest.Test(t, func(t *testing.T) {
		first = lockOnce(t, memoryCluster(t), "in-bubble")
	})
	if got := lockOnce(t, memoryCluster(t), "outside"); got != first {
		t.Fatal("the pool did not hand back the Call used in the bubble")
	}
	synctest.Test(t, func(t *testing.T) {
		if got := lockOnce(t, memoryCluster(t), "in-another-bubble"); got != first {
			t.Fatal("the pool did not hand back the Call")
		}
	})
}
