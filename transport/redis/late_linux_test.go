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
	s := redistest.Start(t, 1)[0]
	var (
		hold    = make(chan struct{})
		arrived = make(chan struct{})
		release = make(chan struct{})
		waiting = make(chan struct{}, 1)
	)
	var once sync.Once
	testReaderHook = func(p *pipe) {
		select {
		case <-hold:
		default:
			return
		}
		once.Do(func() { stall(t, p, arrived, release) })
	}
	testLateHook = func() { waiting <- struct{}{} }
	t.Cleanup(func() { testReaderHook, testLateHook = nil, nil })

	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("warm", "v", time.Minute)}, true)
	close(hold)                                           // the reader stops at its next wait
	mustDo(t, tr, []transport.Op{rel("warm", "v")}, true) // ... which comes after this reply

	ctx, cancel := context.WithCancel(context.Background())
	res := make([]transport.Result, 1)
	done := make(chan error, 1)
	go func() { done <- tr.Do(ctx, []transport.Op{acq("late", "v", time.Minute)}, res) }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the reply never reached the socket")
	}
	cancel()
	select {
	case <-waiting:
		close(release)
	case err := <-done:
		close(release)
		t.Fatalf("the batch failed with its reply in the socket: %v (op: %v); want the grant", err, res[0].Err)
	}
	if err := <-done; err != nil || !res[0].OK {
		t.Fatalf("batch with its reply in the socket: %v (op: %+v), want the grant", err, res[0])
	}
}

// stall holds the reader until its next reply waits in the socket, says so,
// and waits for release. The reader's own goroutine waits for the socket to
// become readable (RawConn.Read calls back on each readiness event) without
// reading, so the bytes stay in the kernel, where replyWaiting sees them.
func stall(t *testing.T, p *pipe, arrived, release chan struct{}) {
	rc, ok := p.rawConn()
	if !ok {
		t.Errorf("%T has no file descriptor", p.nc)
		close(arrived)
		return
	}
	if err := rc.Read(func(uintptr) bool { return p.replyWaiting() }); err != nil {
		t.Errorf("waiting for the reply: %v", err)
	}
	close(arrived)
	<-release
}
