package redis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// A reply that reached the client before the batch's context ended is the
// master's answer, not its silence: on a CPU-starved client the reader may
// simply not have run yet (Go polls the network when a P is idle or from
// sysmon, while timers fire on every scheduling round). Failing such a batch
// reports a healthy master as unreachable (issue 13's residual overload
// failure). Here the reader is held while the reply waits in the socket and
// the context ends; the batch must still get its grant. Counting it is safe:
// validity counts from the send, so a late reply only shortens the lock.
func TestReplyInSocketCounts(t *testing.T) {
	lb := lateBatch(t)
	select {
	case <-lb.waiting:
		lb.release()
	case err := <-lb.done:
		lb.release()
		t.Fatalf("the batch failed with its reply in the socket: %v (op: %v); want the grant", err, lb.res[0].Err)
	}
	if err := <-lb.done; err != nil || !lb.res[0].OK {
		t.Fatalf("batch with its reply in the socket: %v (op: %+v), want the grant", err, lb.res[0])
	}
}

// readerHold is a transport on one redis-server whose reader, once a
// warm-up batch is done, holds before read(2) as soon as the next reply's
// bytes wait in the socket, until release. Held there, the bytes stay in
// the kernel, and the reader waits for every reply in the hook, so the
// first bytes after the hold are those of the first batch the test sends.
type readerHold struct {
	s       *redistest.Server
	tr      *Transport
	arrived chan struct{} // the first reply after the hold waits in the socket
	waiting chan struct{} // a batch began its late wait (testLateHook)
	pipe    *pipe         // the held connection
	n       int           // bytes waiting in its socket when it was held
	release func()        // lets the reader go on; idempotent, also at cleanup
}

// holdReader sets up a readerHold. Hooks and variables set before the call
// (testLateTick, lateReplyWait, lateReplyCap) stay the caller's to reset.
func holdReader(t *testing.T) *readerHold {
	t.Helper()
	h := &readerHold{s: redistest.Start(t, 1)[0], arrived: make(chan struct{}), waiting: make(chan struct{}, 1)}
	hold, released := make(chan struct{}), make(chan struct{})
	var once, rel sync.Once
	h.release = func() { rel.Do(func() { close(released) }) }
	testReadHook = func(p *pipe) {
		n := awaitBytes(t, p, 0)
		select {
		case <-hold:
		default:
			return
		}
		once.Do(func() {
			h.pipe, h.n = p, n
			close(h.arrived)
			<-released
		})
	}
	testLateHook = func() {
		select {
		case h.waiting <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testReadHook, testLateHook = nil, nil })
	h.tr = dial(t, Config{Addr: h.s.Addr})
	// Registered after dial's, so it runs first: the transport closes with
	// its reader let go.
	t.Cleanup(h.release)
	mustDo(t, h.tr, []transport.Op{acq("warm", "v", time.Minute)}, true)
	close(hold)
	return h
}

// awaitArrived waits until the first reply after the hold waits in the
// socket.
func (h *readerHold) awaitArrived(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never reached the socket", what)
	}
}

// heldBatch is a batch whose reply reached its socket while the reader was
// held before read(2), and whose context has ended (lateBatch).
type heldBatch struct {
	*readerHold
	done chan error // Do's result
	res  []transport.Result
}

// lateBatch sends one acquire through a readerHold, waits until its reply
// is in the socket, and cancels its context.
func lateBatch(t *testing.T) *heldBatch {
	t.Helper()
	lb := &heldBatch{readerHold: holdReader(t), done: make(chan error, 1), res: make([]transport.Result, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { lb.done <- lb.tr.Do(ctx, []transport.Op{acq("late", "v", time.Minute)}, lb.res) }()
	lb.awaitArrived(t, "the reply")
	cancel()
	return lb
}

// awaitBytes waits, on the reader's goroutine, until more than n bytes wait
// in the socket, and returns how many do. RawConn.Read calls back on each
// readiness event without reading, so the bytes stay in the kernel, where
// FIONREAD sees them.
func awaitBytes(t *testing.T, p *pipe, n int) int {
	rc, ok := p.rawConn()
	if !ok {
		t.Errorf("%T has no file descriptor", p.nc)
		return 0
	}
	var got int
	if err := rc.Read(func(uintptr) bool { got = p.unread(); return got > n }); err != nil {
		// The connection closed (the test is ending): let the reader see it.
		return 0
	}
	return got
}

// The same when the reply has left the socket but not the reader's buffer:
// one read(2) took the replies of two batches, the reader handed the first
// its reply and then stalled (a CPU-starved client's reader is preempted
// between any two instructions) before decoding the second's. FIONREAD
// sees an empty socket; the master answered all the same, and the batch
// must get its grant (issue 13: 27 of 42 batches failed this way in a
// loaded TestOverloadOnRealMasters).
func TestReplyInReaderBufferCounts(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	var (
		hold    = make(chan struct{})
		aIn     = make(chan struct{}) // A's reply waits in the socket
		bGo     = make(chan struct{}) // B has been sent
		bothIn  = make(chan struct{}) // B's reply waits behind it
		held    = make(chan struct{}) // A was answered; the reader holds B's reply
		release = make(chan struct{})
		waiting = make(chan struct{}, 1)
	)
	// Before each read(2) the reader waits for the socket to become
	// readable; after hold, it lets A's reply and B's gather there so that
	// one read takes both.
	reads := 0
	testReadHook = func(p *pipe) {
		a := awaitBytes(t, p, 0)
		select {
		case <-hold:
		default:
			return
		}
		if reads++; reads == 1 {
			close(aIn)
			<-bGo
			awaitBytes(t, p, a)
			close(bothIn)
		}
	}
	var once sync.Once
	testReaderHook = func(p *pipe) {
		select {
		case <-bothIn: // A delivered, B's reply read into the buffer, not decoded
		default:
			return
		}
		once.Do(func() {
			if n := p.unread(); n != 0 {
				t.Errorf("%d bytes still in the socket; want both replies read at once", n)
			}
			if p.br.Buffered() == 0 {
				t.Error("B's reply is not in the reader's buffer")
			}
			close(held)
			<-release
		})
	}
	testLateHook = func() { waiting <- struct{}{} }
	t.Cleanup(func() { testReadHook, testReaderHook, testLateHook = nil, nil, nil })

	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("warm", "v", time.Minute)}, true)
	close(hold)

	aDone := make(chan error, 1)
	aRes := make([]transport.Result, 1)
	go func() { aDone <- tr.Do(context.Background(), []transport.Op{acq("a", "v", time.Minute)}, aRes) }()
	<-aIn
	ctx, cancel := context.WithCancel(context.Background())
	bRes := make([]transport.Result, 1)
	bDone := make(chan error, 1)
	go func() { bDone <- tr.Do(ctx, []transport.Op{acq("b", "v", time.Minute)}, bRes) }()
	// B is written before its Do waits; its reply reaching the socket
	// (seen by the held reader) says so.
	close(bGo)
	select {
	case <-bothIn:
	case <-time.After(10 * time.Second):
		t.Fatal("B's reply never reached the socket")
	}
	if err := <-aDone; err != nil || !aRes[0].OK {
		t.Fatalf("A: %v (op: %+v), want the grant", err, aRes[0])
	}
	<-held
	cancel()
	select {
	case <-waiting:
		close(release)
	case err := <-bDone:
		close(release)
		t.Fatalf("the batch failed with its reply in the reader's buffer: %v (op: %v); want the grant", err, bRes[0].Err)
	}
	if err := <-bDone; err != nil || !bRes[0].OK {
		t.Fatalf("batch with its reply in the reader's buffer: %v (op: %+v), want the grant", err, bRes[0])
	}
}

// A reply that reached the client before the deadline counts however long
// the reader then takes: on a starved client the whole process can stall
// for longer than any fixed grace (in a loaded TestOverloadOnRealMasters,
// three replies waiting in their sockets at the deadline were read 1.3 s
// later, after the 500 ms wait had failed them, and their TryLock failed as
// ErrQuorumUnreachable). Here the reader is held past the late wait (made
// 1ms); the batch must keep waiting while what had arrived by its deadline
// is undecoded, and get its grant once the reader runs.
func TestReplyReadLateStillCounts(t *testing.T) {
	ticks := make(chan struct{}, 16)
	testLateTick = func() {
		select {
		case ticks <- struct{}{}:
		default:
		}
	}
	old := lateReplyWait
	lateReplyWait = time.Millisecond
	t.Cleanup(func() { testLateTick, lateReplyWait = nil, old })

	lb := lateBatch(t)
	fail := func(err error) {
		lb.release()
		t.Fatalf("the batch gave up while its reply, arrived before its deadline, waited for the held reader: %v (op: %v); want the grant", err, lb.res[0].Err)
	}
	select {
	case <-lb.waiting:
	case err := <-lb.done:
		fail(err)
	}
	// Past the late wait, twice over: still waiting.
	for range 2 {
		select {
		case <-ticks:
		case err := <-lb.done:
			fail(err)
		}
	}
	lb.release()
	if err := <-lb.done; err != nil || !lb.res[0].OK {
		t.Fatalf("batch whose reply the reader read late: %v (op: %+v), want the grant", err, lb.res[0])
	}
}
