package actors

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
)

// A cancel of a Call's first lifetime that reaches its coordinator only
// once the Call runs its next lifetime, in another shard, must be dropped:
// the caller sends it as its context ends, finds the call already finished,
// releases the Call and the next GetCall gets it, while the cancel still
// waits in a busy coordinator's mailbox. Without the generation check the
// first shard abandons the second lifetime's acquire (on another shard's
// state), and b, which a majority grants, fails as cancelled.
func TestStaleCancelAfterReuseInAnotherShard(t *testing.T) {
	reused := lifoCalls(t)
	c, ms, hs := holdingCluster(t, 3, 2)
	a, b := keyIn(c, "a", 0), keyIn(c, "b", 1)

	x := tryCall(a, "value-of-a")
	if err := c.Submit(x); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, x); err != nil {
		t.Fatalf("a: %v", err)
	}
	// The caller's context ended as the call finished: its cancel names
	// the first lifetime, and is delivered late (below).
	stale := &cancelCall{call: x, gen: x.life, err: context.Canceled}
	x.Release()
	if got := <-reused; got != x {
		t.Fatal("another Call was recycled")
	}

	// Second lifetime, in shard 1: b is someone else's on m1, and m2's
	// answer is held, so b stays undecided (one grant, one refusal) until
	// the test lets m2 answer.
	hold(t, ms[1], b)
	openB2 := hs[2].gate(b)
	defer openB2()
	y := tryCall(b, "value-of-b")
	y.MakeDone()
	if y != x {
		t.Fatal("the pool did not hand back the Call just recycled")
	}
	if err := c.Submit(y); err != nil {
		t.Fatal(err)
	}
	waitArrived(t, hs[2], b)
	waitAnswered(t, hs[0], b)
	waitAnswered(t, hs[1], b)

	c.system.Root.Send(c.coords[0], stale)
	// Once a call submitted after it to shard 0 is done, so is the cancel.
	z := NewCall(Acquire, "trylock", keyIn(c, "z", 0), "value-of-z", time.Minute, time.Millisecond)
	z.Retry = api.DefaultOptions().Retry
	z.Retry.MaxAttempts = 1
	if err := c.Submit(z); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, z); err != nil {
		t.Fatalf("z: %v", err)
	}
	select {
	case <-y.Done():
		t.Fatalf("b's TryLock finished (%v) while m2 held its SET: a stale cancel of a's lifetime ended it", y.Err)
	default:
	}
	openB2()
	if err := wait(t, y); err != nil {
		t.Fatalf("b, free on m0 and m2: got %v, want nil", err)
	}
	y.Release()
}
