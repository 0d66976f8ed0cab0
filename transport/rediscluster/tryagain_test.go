package rediscluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// tryAgains reads how many TRYAGAIN errors s has answered.
func tryAgains(t *testing.T, s *redistest.Server) int { t.Helper(); return s.ErrorCount(t, "TRYAGAIN") }

// TestFencedAcquireDuringMigration: a fenced acquire is a script over the
// lock key and its counter. While their slot is half moved (the counter
// already on the target, the lock key on neither node) the source answers
// ASK and the target TRYAGAIN: a multi-key command whose keys are not all
// there. Redis Cluster clients retry TRYAGAIN after a short delay; an
// acquire that does so within its deadline is granted once the move ends,
// with the next token of the counter that moved.
func TestFencedAcquireDuringMigration(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const key = "tryagain"
	fenced := func(v string) transport.Op {
		return transport.Op{Kind: transport.AcquireFenced, Key: key, Value: v, TTL: 10 * time.Second}
	}
	res := make([]transport.Result, 2)
	if err := c.Do(ctx, []transport.Op{fenced("a"), {Kind: transport.Release, Key: key, Value: "a"}}, res); err != nil || !res[0].OK || res[0].Token != 1 || !res[1].OK {
		t.Fatalf("acquire and release before the move: %+v, %v", res, err)
	}
	// The slot now holds the counter alone.
	ps := procs(nodes)
	slot := rediscluster.Slot(key)
	src, err := redisproc.SlotOwner(ctx, ps, slot)
	if err != nil {
		t.Fatal(err)
	}
	dst := 1 - src
	before := tryAgains(t, nodes[dst])

	type outcome struct {
		res transport.Result
		err error
	}
	done := make(chan outcome, 1)
	var got *outcome
	err = redisproc.MigrateSlot(ctx, ps, ps[src], ps[dst], slot, 1, func() error {
		// The counter has moved; the slot is still the source's.
		go func() {
			r := make([]transport.Result, 1)
			octx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := c.Do(octx, []transport.Op{fenced("b")}, r)
			done <- outcome{r[0], err}
		}()
		// Let the move end only once the acquire has met TRYAGAIN (or
		// has given up).
		for tryAgains(t, nodes[dst]) == before {
			select {
			case o := <-done:
				got = &o
				return nil
			case <-time.After(time.Millisecond): // poll: another process's counter
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		o := <-done
		got = &o
	}
	if got.err != nil || got.res.Err != nil || !got.res.OK {
		t.Fatalf("fenced acquire while its slot was half moved: %+v (Do: %v); want it retried after TRYAGAIN and granted once the slot moved", got.res, got.err)
	}
	if got.res.Token != 2 {
		t.Fatalf("token %d after the move, want 2 (the counter moved with its slot)", got.res.Token)
	}
	if n := tryAgains(t, nodes[dst]); n == before {
		t.Fatal("the target never answered TRYAGAIN: the test did not reach the half-moved state")
	}
}

// TestTryAgainPastDeadline: a slot that stays half moved past the op's
// deadline fails the fenced acquire with an error (never a plain "no",
// which would claim the master answered), and Do returns by the deadline.
func TestTryAgainPastDeadline(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const key = "tryagain-stuck"
	res := make([]transport.Result, 2)
	if err := c.Do(ctx, []transport.Op{{Kind: transport.AcquireFenced, Key: key, Value: "a", TTL: 10 * time.Second}, {Kind: transport.Release, Key: key, Value: "a"}}, res); err != nil || !res[0].OK || !res[1].OK {
		t.Fatalf("acquire and release: %+v, %v", res, err)
	}
	ps := procs(nodes)
	slot := rediscluster.Slot(key)
	src, err := redisproc.SlotOwner(ctx, ps, slot)
	if err != nil {
		t.Fatal(err)
	}
	dst := 1 - src
	stuck := errString("left half moved")
	err = redisproc.MigrateSlot(ctx, ps, ps[src], ps[dst], slot, 1, func() error {
		// An op whose 200ms ran out before it reached the target (the ASK
		// from the source, then the target's TRYAGAIN) on a loaded machine
		// fails for its deadline, and fails all the same; the TRYAGAIN
		// error is looked for again until ctx ends.
		for {
			octx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			r := make([]transport.Result, 1)
			_ = c.Do(octx, []transport.Op{{Kind: transport.AcquireFenced, Key: key, Value: "b", TTL: 10 * time.Second}}, r)
			cancel()
			switch {
			case r[0].Err == nil:
				t.Errorf("fenced acquire on a slot half moved for good: %+v, want an error", r[0])
			case strings.Contains(r[0].Err.Error(), "TRYAGAIN"):
			case ctx.Err() == nil:
				t.Logf("error %v: again", r[0].Err)
				continue
			default:
				t.Errorf("error %v, want it to name TRYAGAIN", r[0].Err)
			}
			return stuck
		}
	})
	if err != stuck {
		t.Fatalf("MigrateSlot: %v", err)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestTryAgainBudget: the TRYAGAIN retries hold the replies of the batch's
// other ops with them, so they stop after a short budget even when the
// op's deadline is far: a grant's validity counts from the send, and the
// engine's master timeout may be as long as the TTL (with TTL 2s and a
// master timeout of 2s, TestClusterResharding's locks came back with their
// validity already over). An op of the same batch that the target could
// serve (over ASK) is granted.
func TestTryAgainBudget(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	c := open(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const key = "tryagain-budget"
	other := "{" + key + "}:other" // the same slot, a single-key op
	res := make([]transport.Result, 2)
	if err := c.Do(ctx, []transport.Op{{Kind: transport.AcquireFenced, Key: key, Value: "a", TTL: 10 * time.Second}, {Kind: transport.Release, Key: key, Value: "a"}}, res); err != nil || !res[0].OK || !res[1].OK {
		t.Fatalf("acquire and release: %+v, %v", res, err)
	}
	ps := procs(nodes)
	slot := rediscluster.Slot(key)
	src, err := redisproc.SlotOwner(ctx, ps, slot)
	if err != nil {
		t.Fatal(err)
	}
	stuck := errString("left half moved")
	err = redisproc.MigrateSlot(ctx, ps, ps[src], ps[1-src], slot, 1, func() error {
		const far = 10 * time.Second
		octx, cancel := context.WithTimeout(ctx, far)
		defer cancel()
		r := make([]transport.Result, 2)
		_ = c.Do(octx, []transport.Op{
			{Kind: transport.AcquireFenced, Key: key, Value: "b", TTL: 10 * time.Second},
			{Kind: transport.Acquire, Key: other, Value: "b", TTL: 10 * time.Second},
		}, r)
		if octx.Err() != nil {
			t.Errorf("Do retried TRYAGAIN until its deadline (%v), holding the batch's other replies all along", far)
		}
		if r[0].Err == nil || !strings.Contains(r[0].Err.Error(), "TRYAGAIN") {
			t.Errorf("fenced acquire on a slot half moved for good: %+v, want a TRYAGAIN error", r[0])
		}
		if !r[1].OK || r[1].Err != nil {
			t.Errorf("acquire of a fresh key of the slot, in the same batch: %+v, want granted by the target", r[1])
		}
		return stuck
	})
	if err != stuck {
		t.Fatalf("MigrateSlot: %v", err)
	}
}
