package rediscluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// transport.ErrNotSent says no master saw the op and the lateness was this
// process's, and the engine retries such an acquire without counting the
// attempt. An op resent after MOVED was seen (and refused) by the node that
// redirected it, and its deadline went on the cluster's round trips: when
// the resend finds the deadline passed, the op failed for lack of an answer
// in time, as a master that did not answer. Here the slot moves to the node
// the slot-map refresh asks first (masters in address order), which is
// then stopped (SIGSTOP): the MOVED comes back at once, the refresh before
// the resend waits out the op's deadline on the stopped node, and the
// resend reaches the shard transport past it.
func TestRedirectPastDeadlineIsNotNotSent(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps := procs(nodes)
	// first: the node a refresh asks first; other: the one the key starts on.
	first, other := 0, 1
	if nodes[1].Addr < nodes[0].Addr {
		first, other = 1, 0
	}
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("moved-%d", i)
		if owner, err := redisproc.SlotOwner(ctx, ps, rediscluster.Slot(k)); err != nil {
			t.Fatal(err)
		} else if owner == other {
			key = k
		}
	}
	acq := func(k string) transport.Op {
		return transport.Op{Kind: transport.Acquire, Key: k, Value: "v", TTL: 10 * time.Second}
	}
	// Both nodes' connections up before the move: the resend must meet a
	// connected shard transport, not a dial.
	var warm []transport.Op
	for i := 0; len(warm) < 2; i++ {
		k := fmt.Sprintf("warm-%d", i)
		owner, err := redisproc.SlotOwner(ctx, ps, rediscluster.Slot(k))
		if err != nil {
			t.Fatal(err)
		}
		if (len(warm) == 0 && owner == first) || (len(warm) == 1 && owner == other) {
			warm = append(warm, acq(k))
		}
	}
	res := make([]transport.Result, len(warm))
	if err := c.Do(ctx, warm, res); err != nil || !res[0].OK || !res[1].OK {
		t.Fatalf("warm-up on both shards: %+v, %v", res, err)
	}
	if err := redisproc.MigrateSlot(ctx, ps, ps[other], ps[first], rediscluster.Slot(key), 10, nil); err != nil {
		t.Fatal(err)
	}
	nodes[first].Pause()
	defer nodes[first].Resume()

	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ocancel()
	r := make([]transport.Result, 1)
	_ = c.Do(octx, []transport.Op{acq(key)}, r)
	if moved, _ := c.Redirects(); moved == 0 {
		t.Fatalf("the op did not meet MOVED (result %+v): the test did not reach the redirect", r[0])
	}
	if r[0].Err == nil || r[0].OK {
		t.Fatalf("acquire resent to a stopped node: %+v, want a failure", r[0])
	}
	if errors.Is(r[0].Err, transport.ErrNotSent) {
		t.Fatalf("acquire redirected by MOVED, its resend past the deadline: %v; want a failure by the deadline, not transport.ErrNotSent (a master saw it, and the lateness was the cluster's)", r[0].Err)
	}
	if !errors.Is(r[0].Err, context.DeadlineExceeded) {
		t.Errorf("acquire redirected by MOVED, its resend past the deadline: %v; want it to wrap the deadline", r[0].Err)
	}
}
