package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// Do returns by its context's deadline (the transport contract), even after
// an earlier batch's write was cut short. A batch whose write met its
// deadline part way (errWriteCut) leaves the rest to finishWrite, which
// writes it with no deadline while holding the write lock, so that no
// later batch overtakes it; and a later batch waited for that lock with no
// regard for its context. A master that stopped reading (SIGSTOP, a hung
// process) with the socket's buffers full then held every later Do of the
// connection until it read again: the node's I/O workers stuck, an Unlock
// waiting for that master's answer without end, and engine.Close waiting
// for the batches in flight.
func TestWriteCutDoesNotHoldLaterBatches(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	s.Pause()
	defer s.Resume()

	// One write larger than the socket's buffers on both ends (at most 4
	// and 32 MiB here) is cut part way by its deadline. The fill's context
	// ends a second after the deadline it gives the write: Do reports a
	// batch whose context has ended as "no answer" whatever cut it, so with
	// one instant for both the cut showed only when the socket's deadline
	// beat the context's timer, and a fresh clone's CI run never saw it.
	big := strings.Repeat("v", 64<<20)
	cut := false
	for i := 0; i < 5 && !cut; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 1300*time.Millisecond)
		res := make([]transport.Result, 1)
		_ = tr.Do(cutCtx{ctx, time.Now().Add(300 * time.Millisecond)}, []transport.Op{acq(fmt.Sprint("fill", i), big, time.Minute)}, res)
		cancel()
		cut = errors.Is(res[0].Err, errWriteCut)
	}
	if !cut {
		t.Fatal("no write was cut part way by its deadline: the test sets nothing up")
	}

	const limit = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res := make([]transport.Result, 1)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- tr.Do(ctx, []transport.Op{acq("later", "v", time.Minute)}, res) }()
	select {
	case <-done:
		// The late wait may add its ticks, no more: nothing arrives.
		if took := time.Since(start); took > limit+time.Second {
			t.Errorf("Do returned after %v; want about its deadline, %v", took, limit)
		}
		if res[0].OK || res[0].Err == nil {
			t.Errorf("a batch to a stopped master: %+v; want a failure", res[0])
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Do with a %v deadline still runs 5s later: it waits for the write lock that the cut batch's rest holds while the master does not read", limit)
		s.Resume()
		<-done
	}
}

// cutCtx gives a write the deadline d, earlier than its Context ends.
type cutCtx struct {
	context.Context
	d time.Time
}

func (c cutCtx) Deadline() (time.Time, bool) { return c.d, true }
