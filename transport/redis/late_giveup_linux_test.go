package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
)

// A batch that gives up its late wait (lateReplyCap) with its reply still
// unread leaves its entry in the reader's queue: its reply, when read, must
// go to it, and the next batch on the connection must get its own. The
// abandoned batch A takes the key (its SET went out and landed); batch B,
// sent on the same connection while A's reply is still held, asks for the
// same key with another value and must be refused. Had the give-up
// dropped A's entry, B would read A's "OK" and two holders would have the
// key. A must fail as "no answer", never as transport.ErrNotSent: its bytes
// were written, and the engine turns a not-sent acquire into a retry that
// assumes no master saw it.
func TestLateGiveUpKeepsRepliesInStep(t *testing.T) {
	oldCap := lateReplyCap
	lateReplyCap = 5 * time.Millisecond
	t.Cleanup(func() { lateReplyCap = oldCap })
	h := holdReader(t)
	tr := h.tr

	ctx, cancel := context.WithCancel(context.Background())
	aRes := make([]transport.Result, 1)
	aDone := make(chan error, 1)
	go func() { aDone <- tr.Do(ctx, []transport.Op{acq("k", "a", time.Minute)}, aRes) }()
	h.awaitArrived(t, "A's reply")
	cancel()
	// A waits for the held reader, then gives up at the cap.
	select {
	case <-h.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("A did not begin its late wait")
	}
	aErr := <-aDone
	if aErr == nil || aRes[0].Err == nil {
		t.Fatalf("A = %v (op %+v) with the reader held past the cap; want a failure", aErr, aRes[0])
	}
	if errors.Is(aRes[0].Err, transport.ErrNotSent) {
		t.Errorf("A, written and unanswered, failed as %v; want no answer, not transport.ErrNotSent", aRes[0].Err)
	}

	// B goes out behind A on the same connection, its reply behind A's.
	bRes := make([]transport.Result, 1)
	bDone := make(chan error, 1)
	go func() { bDone <- tr.Do(context.Background(), []transport.Op{acq("k", "b", time.Minute)}, bRes) }()
	// Both replies wait in the socket (the reader is held outside read(2),
	// so this goroutine may wait for readiness on its descriptor).
	awaitBytes(t, h.pipe, h.n)
	h.release()
	if err := <-bDone; err != nil || bRes[0].Err != nil {
		t.Fatalf("B: %v (op %+v)", err, bRes[0])
	}
	if bRes[0].OK {
		t.Fatal("B was granted a key A's abandoned SET had taken: A's reply went to B")
	}
	// A's SET is what holds the key: its value releases it.
	mustDo(t, tr, []transport.Op{rel("k", "a")}, true)
}
