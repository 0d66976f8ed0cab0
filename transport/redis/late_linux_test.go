package redis

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// unread is how many bytes wait in p's socket, unread.
func unread(t *testing.T, p *pipe) int {
	nc := p.nc
	if h, ok := nc.(*hookConn); ok {
		nc = h.Conn
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		t.Errorf("%T has no file descriptor", nc)
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Error(err)
		return -1
	}
	var n uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		var v int32
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v)))
		n = uintptr(v)
	}); err != nil || errno != 0 {
		t.Errorf("FIONREAD: %v %v", err, errno)
		return -1
	}
	return int(n)
}

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
// and waits for release.
func stall(t *testing.T, p *pipe, arrived, release chan struct{}) {
	for unread(t, p) == 0 { // -1: the test has failed; let it end
		time.Sleep(time.Millisecond) // poll: the kernel sends no event we can wait on here
	}
	close(arrived)
	<-release
}
