package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
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

// holding wraps a memory master: a batch with an op on a key in hold waits
// for that key's gate (whatever its context says: the master timeout of
// these tests is far away), and each op's answer is reported on answered.
type holding struct {
	transport.Transport
	mu       sync.Mutex
	hold     map[string]chan struct{}
	answered chan string // the keys of the ops answered, in order
}

func newHolding(m *memory.Master) *holding {
	return &holding{Transport: m.Transport(), hold: map[string]chan struct{}{}, answered: make(chan string, 64)}
}

func (h *holding) gate(key string) (open func()) {
	g := make(chan struct{})
	h.mu.Lock()
	h.hold[key] = g
	h.mu.Unlock()
	return sync.OnceFunc(func() { close(g) })
}

func (h *holding) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	for _, op := range ops {
		h.mu.Lock()
		g := h.hold[op.Key]
		h.mu.Unlock()
		if g != nil {
			<-g
		}
	}
	err := h.Transport.Do(ctx, ops, res)
	for _, op := range ops {
		h.answered <- op.Key
	}
	return err
}

// waitAnswered waits until h has answered an op on key.
func waitAnswered(t *testing.T, h *holding, key string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-h.answered:
			if k == key {
				return
			}
		case <-timeout:
			t.Fatalf("no answer on %q", key)
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
	res := make([]transport.Result, 1)
	if err := m.Transport().Do(context.Background(), []transport.Op{{Kind: transport.Acquire, Key: key, Value: "someone-else", TTL: time.Minute}}, res); err != nil || !res[0].OK {
		t.Fatalf("taking %s: %v %+v", key, err, res[0])
	}
}

func tryCall(key, value string) *Call {
	call := GetCall(Acquire, "trylock", key, value, time.Minute, time.Millisecond)
	call.Retry = api.DefaultOptions().Retry
	call.Retry.MaxAttempts = 1
	return call
}

func wait(t *testing.T, call *Call) error {
	t.Helper()
	select {
	case <-call.Done():
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
