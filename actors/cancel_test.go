package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// downThenHung fails its first batch at once, as a dead master does, and
// holds every later one until its context ends, as a master that stopped
// answering does.
type downThenHung struct {
	transport.Transport
	calls atomic.Int32
}

func (d *downThenHung) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if d.calls.Add(1) == 1 {
		return transport.Fail(res, fmt.Errorf("%w: connection refused", transport.ErrUnavailable))
	}
	<-ctx.Done()
	return transport.Fail(res, ctx.Err())
}

// A Lock whose context ends while an attempt is out, before any master has
// answered it, reports the answers of the last attempt that had any: those
// are what its Last error describes ("fewer than 3 could vote: failed,
// failed, failed"), where the cut attempt's are all pending and explain
// nothing (cmd/redlock's TestRunUnreachable saw exactly that on a loaded
// machine when --wait ran out).
func TestCancelledMidAttemptReportsLastAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := make([]transport.Transport, 3)
		for i := range ts {
			ts[i] = &downThenHung{Transport: memory.New().Transport()}
		}
		c := start(t, ts, 10*time.Second, 1)
		call := lockCall("k", "v", 0)
		if err := c.Submit(call); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // fake time: the first attempt failed, the second is out
		synctest.Wait()
		c.Cancel(call, context.DeadlineExceeded)
		<-call.Done()
		var ae *api.Error
		if !errors.As(call.Err, &ae) || !errors.Is(call.Err, context.DeadlineExceeded) || !errors.Is(call.Err, api.ErrQuorumUnreachable) {
			t.Fatalf("got %v; want DeadlineExceeded after ErrQuorumUnreachable", call.Err)
		}
		if ae.Attempts < 2 {
			t.Fatalf("%d attempts, want the second one cut", ae.Attempts)
		}
		// The first attempt was decided once a majority was out of reach:
		// at least two of three failed (the third may still be pending).
		failed := 0
		for _, m := range ae.Masters {
			if m.Answer == api.Failed && errors.Is(m.Err, transport.ErrUnavailable) {
				failed++
			}
		}
		if failed < 2 {
			t.Fatalf("%d masters failed in the answers reported, want the 2 or more that made the quorum unreachable: %v", failed, call.Err)
		}
	})
}
