package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

func memoryMasters(n int) ([]*memory.Master, []transport.Transport) {
	ms := make([]*memory.Master, n)
	ts := make([]transport.Transport, n)
	for i := range ms {
		ms[i] = memory.New()
		ts[i] = ms[i].Transport()
	}
	return ms, ts
}

// Waiters of one engine get the key in the order they asked for it.
func TestLocalWaitersFIFO(t *testing.T) {
	synctest.Test(t, testLocalWaitersFIFO)
}

func testLocalWaitersFIFO(t *testing.T) {
	e := newMemory(t, 5)
	ctx := context.Background()
	holder, err := e.Lock(ctx, "fifo")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, err := e.Lock(ctx, "fifo")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = l.Unlock(ctx)
		}(i)
		synctest.Wait() // waiter i has asked (and blocks) before waiter i+1 asks
	}
	// The waiters' backoff grows while they wait; FIFO must not depend on
	// it. (Fake time: the bubble's clock jumps once everyone is blocked.)
	time.Sleep(100 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("waiters got the lock in order %v; want 0..%d", order, n-1)
		}
	}
}

// A waiter whose context ends leaves the line at once; the ones behind it
// move up.
func TestCancelledWaiterLeavesQueue(t *testing.T) {
	synctest.Test(t, testCancelledWaiterLeavesQueue)
}

func testCancelledWaiterLeavesQueue(t *testing.T) {
	e := newMemory(t, 3)
	ctx := context.Background()
	holder, err := e.Lock(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	// The first waiter contends (and backs off); the second waits in line.
	first := make(chan error, 1)
	go func() {
		l, err := e.Lock(ctx, "q")
		if err == nil {
			err = l.Unlock(ctx)
		}
		first <- err
	}()
	synctest.Wait() // the first waiter has asked and is backing off
	cctx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := e.Lock(cctx, "q")
		second <- err
	}()
	synctest.Wait() // the second waiter is in line behind the first
	cancel()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a cancelled waiter stayed in line")
	}
	_ = holder.Unlock(ctx)
	if err := <-first; err != nil {
		t.Fatalf("first waiter: %v", err)
	}
}

func TestMultiKeyAllOrNothing(t *testing.T) {
	ms, ts := memoryMasters(3)
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	l, err := e.TryLockAll(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.Keys()); got != "[a b c]" {
		t.Fatalf("Keys() = %s", got)
	}
	if _, err := e.TryLock(ctx, "b"); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryLock of a key inside a held multi-key lock: %v", err)
	}
	if _, err := e.TryLockAll(ctx, []string{"c", "d"}); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryLockAll overlapping a held lock: %v", err)
	}
	for i, m := range ms {
		if _, ok := m.Get("d"); ok {
			t.Fatalf("master %d: d was set by a multi-key lock that failed", i)
		}
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("Extend of a multi-key lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Len() != 0 {
			t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
		}
	}
	bad := [][]string{nil, {"a", "a"}, {"a", ""}}
	for _, keys := range bad {
		if _, err := e.TryLockAll(ctx, keys); !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("TryLockAll(%q): %v", keys, err)
		}
	}
	if _, err := e.TryLockAll(ctx, []string{"x", "y"}, api.WithFencing(true)); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("fenced multi-key lock: %v", err)
	}
}

// Done fires at the validity deadline of a lock nobody extends.
func TestDoneAtValidityDeadline(t *testing.T) {
	synctest.Test(t, testDoneAtValidityDeadline)
}

func testDoneAtValidityDeadline(t *testing.T) {
	e := newMemory(t, 3, api.WithTTL(100*time.Millisecond))
	l, err := e.TryLock(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("Err before the end: %v", l.Err())
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done never closed")
	}
	// On the bubble's clock, which only moves when everything waits, Done
	// closes at the deadline exactly: neither before nor after it.
	if now := time.Now(); !now.Equal(l.Until()) {
		t.Fatalf("Done closed at %v from the validity deadline, want at it", now.Sub(l.Until()))
	}
	if !errors.Is(l.Err(), api.ErrExpired) || !errors.Is(l.Err(), api.ErrNotHeld) {
		t.Fatalf("Err = %v, want ErrExpired", l.Err())
	}
}

func TestDoneOnUnlockAndClose(t *testing.T) {
	e, err := engine.NewMemory(3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _ := e.TryLock(ctx, "a")
	b, _ := e.TryLock(ctx, "b")
	done := a.Done()
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done still open after Unlock")
	}
	if !errors.Is(a.Err(), api.ErrReleased) {
		t.Fatalf("Err after Unlock = %v", a.Err())
	}
	bd := b.Done()
	_ = e.Close()
	select {
	case <-bd:
	default:
		t.Fatal("Done still open after Close")
	}
	if !errors.Is(b.Err(), api.ErrClosed) {
		t.Fatalf("Err after Close = %v", b.Err())
	}
}

// Auto-extension keeps a lock for ten times its TTL; nobody else can take
// it meanwhile; Unlock leaves nothing behind. In a synctest bubble: the
// fake clock only moves when every goroutine waits, so no scheduling delay
// of a loaded machine can make an extension late.
func TestAutoExtendKeepsLock(t *testing.T) {
	synctest.Test(t, testAutoExtendKeepsLock)
}

func testAutoExtendKeepsLock(t *testing.T) {
	const ttl = 500 * time.Millisecond
	ms, ts := memoryMasters(3)
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	l, err := e.TryLock(ctx, "auto", api.WithAutoExtend(0.5))
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(10 * ttl)
	for time.Now().Before(end) {
		if _, err := e.TryLock(ctx, "auto"); !errors.Is(err, api.ErrNotAcquired) {
			if err == nil && time.Now().Before(l.Until()) {
				t.Fatalf("two owners: another got the lock while ours was valid until %v", time.Until(l.Until()))
			}
			t.Fatalf("auto-extension fell behind: another owner got the lock (%v); ours: %v", err, l.Err())
		}
		select {
		case <-l.Done():
			t.Fatalf("lost an auto-extended lock: %v", l.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Len() != 0 {
			t.Fatalf("master %d holds %d keys after Unlock", i, m.Len())
		}
	}
}

// Auto-extension is bounded by MaxExtensions: then the lock runs out.
func TestAutoExtendBounded(t *testing.T) {
	synctest.Test(t, testAutoExtendBounded)
}

func testAutoExtendBounded(t *testing.T) {
	e := newMemory(t, 3, api.WithTTL(200*time.Millisecond))
	l, err := e.TryLock(context.Background(), "b", api.WithAutoExtend(0.5), api.WithMaxExtensions(3))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a bounded auto-extension never ended")
	}
	if !errors.Is(l.Err(), api.ErrExpired) {
		t.Fatalf("Err = %v; want ErrExpired after the extensions ran out", l.Err())
	}
}

// A master restart is seen through the transport's epoch: until the
// quarantine has passed, the restarted masters do not vote. In a synctest
// bubble, so that "since the restart" is exact on a loaded machine too.
func TestQuarantineAfterRestart(t *testing.T) {
	synctest.Test(t, testQuarantineAfterRestart)
}

func testQuarantineAfterRestart(t *testing.T) {
	ms, ts := memoryMasters(3)
	const period = 300 * time.Millisecond
	e, err := engine.NewWithTransports(ts, api.WithTTL(period), api.WithRestartQuarantine(period))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	// Fresh masters are in quarantine too: they may have just restarted.
	_, err = e.TryLock(ctx, "early")
	if !errors.Is(err, api.ErrQuorumUnreachable) || !errors.Is(firstMasterErr(t, err), api.ErrQuarantined) {
		t.Fatalf("TryLock on masters younger than the quarantine: %v", err)
	}
	time.Sleep(period + time.Millisecond) // fake time: past the quarantine
	l, err := e.TryLock(ctx, "k")
	if err != nil {
		t.Fatalf("TryLock after the quarantine: %v", err)
	}
	_ = l.Unlock(ctx)
	restarted := time.Now() // no later than the masters' own restart
	ms[0].Restart()
	ms[1].Restart()
	if _, err := e.TryLock(ctx, "k2"); !errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatalf("TryLock with 2 of 3 masters just restarted: %v", err)
	}
	for {
		l, err := e.TryLock(ctx, "k3")
		if err == nil {
			if since := time.Since(restarted); since < period {
				t.Fatalf("restarted masters voted %v after restart, before the %v quarantine", since, period)
			}
			_ = l.Unlock(ctx)
			break
		}
		if time.Since(restarted) > 5*period {
			t.Fatalf("still not voting long after the quarantine: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // fake time: retry 10 ms later
	}
}

func firstMasterErr(t *testing.T, err error) error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%v is not an *api.Error", err)
	}
	for _, m := range ae.Masters {
		if m.Err != nil {
			return m.Err
		}
	}
	return nil
}

// Right after New the engine has not read the masters yet; the first
// TryLock waits for that read instead of failing as if they were down.
func TestFirstTryLockWaitsForMasterCheck(t *testing.T) {
	synctest.Test(t, testFirstTryLockWaitsForMasterCheck)
}

func testFirstTryLockWaitsForMasterCheck(t *testing.T) {
	_, ts := memoryMasters(5)
	time.Sleep(201 * time.Millisecond) // fake time: the masters are older than the quarantine
	e, err := engine.NewWithTransports(ts, api.WithTTL(200*time.Millisecond), api.WithRestartQuarantine(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.TryLock(context.Background(), "first")
	if err != nil {
		t.Fatalf("first TryLock on masters past their quarantine: %v", err)
	}
	_ = l.Unlock(context.Background())
}

// Err tells the truth after Until even if nobody ever called Done (whose
// timer is only armed on demand).
func TestErrAfterUntilWithoutDone(t *testing.T) {
	synctest.Test(t, testErrAfterUntilWithoutDone)
}

func testErrAfterUntilWithoutDone(t *testing.T) {
	e := newMemory(t, 3, api.WithTTL(100*time.Millisecond))
	l, err := e.TryLock(context.Background(), "unwatched")
	if err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("Err within validity: %v", l.Err())
	}
	time.Sleep(time.Until(l.Until()) + time.Nanosecond) // fake time
	if !errors.Is(l.Err(), api.ErrExpired) {
		t.Fatalf("Err after Until = %v, want ErrExpired", l.Err())
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done open after Err reported the lock expired")
	}
}
