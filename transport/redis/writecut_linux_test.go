package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
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
	// and 32 MiB here) is cut part way by its deadline. That deadline is
	// set as the write starts (testWriteHook), and the fill's context ends
	// long after it. Both matter: encoding 64 MiB under -race takes a
	// second or more, so a deadline fixed before Do could pass before the
	// write started ("not sent", not cut), and a cut that came after the
	// context ended is reported as "no answer" (errWriteCut wraps
	// context.DeadlineExceeded), after which the next fill waits for the
	// write lock the cut batch's rest holds. A fresh clone's CI run failed
	// on both counts.
	var writeDeadline atomic.Int64 // Unix ns; 0: the context's own
	testWriteHook = func() { writeDeadline.Store(time.Now().Add(300 * time.Millisecond).UnixNano()) }
	defer func() { testWriteHook = nil }()
	big := strings.Repeat("v", 64<<20)
	cut := false
	for i := 0; i < 3 && !cut; i++ {
		writeDeadline.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res := make([]transport.Result, 1)
		_ = tr.Do(startCutCtx{ctx, &writeDeadline}, []transport.Op{acq(fmt.Sprint("fill", i), big, time.Minute)}, res)
		cancel()
		cut = errors.Is(res[0].Err, errWriteCut)
		if !cut {
			t.Logf("fill %d: %v", i, res[0].Err)
		}
	}
	testWriteHook = nil
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

// startCutCtx gives a write the deadline *d once set (by testWriteHook, as
// the write starts), and its Context's own until then.
type startCutCtx struct {
	context.Context
	d *atomic.Int64
}

func (c startCutCtx) Deadline() (time.Time, bool) {
	if ns := c.d.Load(); ns != 0 {
		return time.Unix(0, ns), true
	}
	return c.Context.Deadline()
}
