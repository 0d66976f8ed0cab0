package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// lateCtx is a context whose deadline has passed but whose timer has not
// fired yet: what a batch's context looks like on a machine so busy that its
// goroutine ran only after the deadline, ahead of the timer's.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A batch whose deadline passed before its write began is not sent, and that
// is the batch's failure alone: the connection stays up and serves the next
// batch. (A starved machine does this to healthy masters; tearing the
// connection down for it turned overload into reconnects and failed batches.)
func TestLateWriteKeepsConnection(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("k", "v", time.Minute)}, true)

	res := make([]transport.Result, 1)
	err := tr.Do(lateCtx{context.Background()}, []transport.Op{acq("late", "v", time.Minute)}, res)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(res[0].Err, context.DeadlineExceeded) {
		t.Fatalf("batch past its deadline: %v (op: %v), want DeadlineExceeded", err, res[0].Err)
	}
	if errors.Is(res[0].Err, transport.ErrUnavailable) {
		t.Fatalf("batch past its deadline reported the master unavailable: %v", res[0].Err)
	}
	if _, ok := s.Get(t, "late"); ok {
		t.Error("the batch past its deadline was applied")
	}
	mustDo(t, tr, []transport.Op{acq("k2", "v", time.Minute), rel("k", "v")}, true, true)
	if n := tr.connects.Load(); n != 1 {
		t.Errorf("%d connections made, want 1: a batch past its deadline must not tear the connection down", n)
	}
}
