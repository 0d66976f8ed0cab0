package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
)

// The late wait keeps the master timeout's meaning (ARCHITECTURE, "The
// client's own lateness is not the master's silence"): a batch whose reply
// had not reached this host by its deadline fails as soon as the reader has
// decoded what had, not at lateReplyCap. A's reply waits in the socket, the
// reader held; the master is then stopped (SIGSTOP), so B, written after,
// is never answered. B's deadline passes with A's bytes undecoded, so B
// waits for the reader; once the reader has handed A its reply, B must fail
// (as no answer, not transport.ErrNotSent: it was written) while the cap
// is still a minute away. A wait that ran to the cap would hold a silent
// master's batch for lateReplyCap past the master timeout.
func TestLateWaitEndsWhenReaderCatchesUp(t *testing.T) {
	oldCap := lateReplyCap
	lateReplyCap = time.Minute
	t.Cleanup(func() { lateReplyCap = oldCap })
	h := holdReader(t)
	tr := h.tr

	// A's context outlasts the test (without a deadline of its own it
	// would get OpTimeout, 1s, and begin a late wait of its own).
	actx, acancel := context.WithTimeout(context.Background(), time.Minute)
	defer acancel()
	aRes := make([]transport.Result, 1)
	aDone := make(chan error, 1)
	go func() { aDone <- tr.Do(actx, []transport.Op{acq("a", "v", time.Minute)}, aRes) }()
	h.awaitArrived(t, "A's reply")
	h.s.Pause()
	defer h.s.Resume()

	// B goes to the stopped master; its write only fills the socket's
	// buffer, so it is out well within the second.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	bRes := make([]transport.Result, 1)
	bDone := make(chan error, 1)
	go func() { bDone <- tr.Do(ctx, []transport.Op{acq("b", "v", time.Minute)}, bRes) }()
	select {
	case <-h.waiting:
	case err := <-bDone:
		t.Fatalf("B returned %v (op %v) without waiting for the reader, which held A's reply", err, bRes[0].Err)
	case <-time.After(10 * time.Second):
		t.Fatal("B did not begin its late wait")
	}
	h.release()
	if err := <-aDone; err != nil || !aRes[0].OK {
		t.Fatalf("A: %v (op %+v), want its grant", err, aRes[0])
	}
	select {
	case err := <-bDone:
		if err == nil || bRes[0].OK {
			t.Fatalf("B, sent to a stopped master: %v (op %+v), want a failure", err, bRes[0])
		}
		if !errors.Is(bRes[0].Err, context.DeadlineExceeded) || errors.Is(bRes[0].Err, transport.ErrNotSent) {
			t.Errorf("B failed as %v; want no answer by its deadline, not transport.ErrNotSent", bRes[0].Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B still waits 10s after the reader decoded everything that had arrived by its deadline: the late wait ran on towards lateReplyCap")
	}
}
