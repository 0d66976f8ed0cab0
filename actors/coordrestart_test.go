package actors

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// errCoordBoom is what the coordinator panics with in these tests: an
// error, so that the caller's error must reach it (errors.Is).
var errCoordBoom = errors.New("coord19: a bug in the coordinator's Receive")

// A bug that panics in a coordinator's Receive makes protoactor restart it
// (the same *coordinator) and lose the message that panicked. Then:
//
//   - the call that message was about must be answered, with an error that
//     says the engine hit a bug (api.ErrInternal, wrapping the panic value),
//     not left waiting; no key of it may stay on any master;
//   - calls the coordinator was running for others must go on: a Lock
//     waiting in its key's local line behind a contender is given its turn
//     and wins once the key is free, a lock held across the panic is
//     released by every master, the engine takes and releases locks after;
//   - no key is left on any master once everything is unlocked and the
//     background cleanup had its time, and Close returns.
//
// One case per message a panic can lose: a call as it arrives (run inline
// on the caller's goroutine, the mailbox being idle: lonecall.go), a reply
// batch carrying an acquire's grant, an acquire's retry tick, a reply
// batch of an Unlock, an Extend as it arrives.
func TestCoordinatorRestartAfterPanic(t *testing.T) {
	for _, kind := range []string{"call", "replies", "retry", "release", "extend"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testCoordRestart(t, kind) })
		})
	}
}

func testCoordRestart(t *testing.T, kind string) {
	const n = 3
	ms, ts, names := memoryMasters(n)
	// victim is the call whose message panics; set before it is submitted.
	var victim atomic.Pointer[Call]
	var fired, inline atomic.Bool
	panicked := make(chan struct{})
	testCoordHook = func(c *coordinator, msg any) {
		v := victim.Load()
		if v == nil {
			return
		}
		match := false
		switch m := msg.(type) {
		case *Call:
			match = m == v && (kind == "call" || kind == "extend")
		case *nodeReplies:
			for _, r := range m.items {
				match = match || r.req.call == v && !r.req.cleanup && (kind == "replies" || kind == "release")
			}
		case *retryTick:
			match = m.call == v && kind == "retry"
		}
		if match && fired.CompareAndSwap(false, true) {
			inline.Store(strings.Contains(string(debug.Stack()), ").Submit("))
			close(panicked)
			panic(errCoordBoom)
		}
	}
	c, err := Start(Config{Transports: ts, Names: names, MasterTimeout: 100 * time.Millisecond, MaxBatch: 64, MaxInFlight: 1, Coordinators: 1})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
		testCoordHook = nil
	}()

	retry := api.Retry{MaxAttempts: 0 /* until answered */, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, Multiplier: 2}
	mk := func(ck CallKind, op, key, value string) *Call {
		call := NewCall(ck, op, key, value, 10*time.Minute, time.Millisecond) // outlives the test's minute-long waits
		call.Retry = retry
		return call
	}
	submit := func(call *Call) {
		t.Helper()
		if err := c.Submit(call); err != nil {
			t.Fatalf("Submit %v %q: %v", call.Kind, call.Key, err)
		}
	}
	// answered waits for call's answer, a minute of the bubble's clock at
	// most, so that a call never answered fails the test instead of
	// hanging it.
	answered := func(what string, call *Call) bool {
		t.Helper()
		select {
		case <-call.Done():
			return true
		case <-time.After(time.Minute):
			t.Errorf("%s was never answered", what)
			return false
		}
	}
	run := func(what string, call *Call) bool {
		t.Helper()
		submit(call)
		if !answered(what, call) {
			return false
		}
		if call.Err != nil {
			t.Errorf("%s: %v", what, call.Err)
			return false
		}
		return true
	}

	// Before the panic: a lock held (h), a key held by another owner (q),
	// a contender for q backing off (b), and a Lock in q's local line
	// behind it (w).
	held := mk(Acquire, "lock", "held", "h")
	other := mk(Acquire, "lock", "q", "other")
	if !run("the lock held across the panic", held) || !run("the other owner's lock", other) {
		return
	}
	b := mk(Acquire, "lock", "q", "b")
	b.Queue = true
	submit(b)
	synctest.Wait() // b was refused and backs off
	w := mk(Acquire, "lock", "q", "w")
	w.Queue = true
	submit(w)
	synctest.Wait() // w waits in q's line

	var v *Call
	switch kind {
	case "call", "replies":
		v = mk(Acquire, "trylock", "p", "p")
		v.Retry.MaxAttempts = 1
	case "retry":
		v = mk(Acquire, "lock", "held", "p") // refused: held is held
		v.Retry.MaxAttempts = 5
	case "release":
		if !run("the lock whose Unlock panics", mk(Acquire, "lock", "u", "u")) {
			return
		}
		v = mk(Release, "unlock", "u", "u")
	case "extend":
		v = mk(Extend, "extend", "held", "h")
		v.Until = held.Start.Add(held.Validity)
	}
	victim.Store(v)
	submit(v)
	select {
	case <-panicked:
	case <-time.After(time.Minute):
		t.Fatalf("the coordinator never handled the %s message to panic on", kind)
	}
	if kind == "call" && !inline.Load() {
		t.Errorf("the call did not run on the caller's goroutine (Submit is not on the panic's stack): the test no longer covers the inline path")
	}
	if answered("the call whose message the panic lost", v) {
		var pe *api.PanicError
		switch {
		case !errors.Is(v.Err, api.ErrInternal) || !errors.Is(v.Err, errCoordBoom):
			t.Errorf("the call whose message the panic lost: %v; want api.ErrInternal wrapping the panic value", v.Err)
		case !errors.As(v.Err, &pe) || pe.Value != errCoordBoom:
			t.Errorf("the call whose message the panic lost: %v; want a *api.PanicError with the panic value", v.Err)
		case errors.Is(v.Err, api.ErrQuorumUnreachable):
			t.Errorf("the call whose message the panic lost: %v; want no ErrQuorumUnreachable: the masters were fine", v.Err)
		}
	}

	// After: q is freed; b takes it, w gets its turn when b unlocks.
	if !run("the other owner's unlock", mk(Release, "unlock", "q", "other")) {
		return
	}
	if !answered("the contender backing off at the panic", b) {
		return
	}
	if b.Err != nil {
		t.Errorf("the contender backing off at the panic: %v; want it to win once the key is free", b.Err)
		return
	}
	if !run("the contender's unlock", mk(Release, "unlock", "q", "b")) {
		return
	}
	if !answered("the Lock waiting in the key's local line at the panic", w) {
		return
	}
	if w.Err != nil {
		t.Errorf("the Lock waiting in the key's local line at the panic: %v; want its turn and the lock", w.Err)
		return
	}
	if !run("the waiter's unlock", mk(Release, "unlock", "q", "w")) {
		return
	}
	rel := mk(Release, "unlock", "held", "h")
	if !run("the unlock of the lock held across the panic", rel) {
		return
	}
	if rel.grants != 1<<n-1 {
		t.Errorf("the lock held across the panic was released by masters %03b (bit i: master i); want all", rel.grants)
	}
	after := mk(Acquire, "lock", "after", "a")
	if !run("a lock after the panic", after) || !run("its unlock", mk(Release, "unlock", "after", "a")) {
		return
	}

	// The background cleanup retries within a few master timeouts, up to
	// cleanupMaxWait apart.
	time.Sleep(5 * cleanupMaxWait)
	synctest.Wait()
	for i, m := range ms {
		if k := m.Len(); k != 0 {
			var left []string
			for _, key := range []string{"held", "q", "p", "u", "after"} {
				if val, ok := m.Get(key); ok {
					left = append(left, key+"="+val)
				}
			}
			t.Errorf("master %d holds %d keys %v after every Unlock and the background cleanup", i, k, left)
		}
	}

	if closed = closeWithin(t, c, time.Minute); !closed {
		t.Fatalf("Close did not return after the coordinator restarted")
	}
}

// A bug that panics on every call (say, a user's meter that panics as each
// call finishes) must not stop the coordinator: protoactor's default
// supervisor stops an actor that fails more than 10 times in 10 seconds,
// and a stopped coordinator's calls go to the dead letters while Submit
// returns nil, so every caller of its keys would wait forever. Each call
// must be answered (api.ErrInternal), and the coordinator must still run
// the calls that do not panic.
func TestCoordinatorRestartsEveryTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts, names := memoryMasters(3)
		testCoordHook = func(_ *coordinator, msg any) {
			if call, ok := msg.(*Call); ok && len(call.Key) > 4 && call.Key[:5] == "boom-" {
				panic(errCoordBoom)
			}
		}
		c, err := Start(Config{Transports: ts, Names: names, MasterTimeout: 100 * time.Millisecond, MaxBatch: 64, MaxInFlight: 1, Coordinators: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if !closeWithin(t, c, time.Minute) {
				t.Errorf("Close did not return")
			}
			testCoordHook = nil
		}()
		for i := range 15 { // within a second of the bubble's clock
			call, ok := tryOnce(t, c, fmt.Sprintf("boom-%d", i))
			if !ok {
				return
			}
			if !errors.Is(call.Err, api.ErrInternal) {
				t.Fatalf("call %d, which panicked: %v; want api.ErrInternal", i, call.Err)
			}
		}
		call, ok := tryOnce(t, c, "ok")
		if !ok {
			return
		}
		if call.Err != nil {
			t.Fatalf("a call after 15 panics: %v", call.Err)
		}
		unlockLeavesNoKey(t, c, ms, "ok", "v")
	})
}

// A failed acquire whose releases did not get through is cleaned in the
// background (coordinator.pending); a panic in between must not drop that
// cleanup: once the masters take releases again, its key goes. (Started
// used to make a new pending map at the restart: the cleanup ticks then
// found nothing to do, and the key stayed for its TTL.)
func TestCoordinatorRestartKeepsCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		victim := NewCall(Acquire, "trylock", "p", "p", time.Minute, time.Millisecond)
		victim.Retry.MaxAttempts = 1
		testCoordHook = func(_ *coordinator, msg any) {
			if msg == any(victim) {
				panic(errCoordBoom)
			}
		}
		c, ms, ls := lossyCluster(t, 3, 100*time.Millisecond)
		defer func() {
			c.Close()
			testCoordHook = nil
		}()
		for _, l := range ls {
			l.set(func(l *lossy) { l.loseAcquire, l.relDown = 1, true })
		}
		d := NewCall(Acquire, "trylock", "d", "d", time.Minute, time.Millisecond)
		d.Retry.MaxAttempts = 1
		if err := c.Submit(d); err != nil {
			t.Fatal(err)
		}
		<-d.Done()
		if d.Err == nil {
			t.Fatal("the acquire whose replies were lost won")
		}
		for i, m := range ms {
			if _, ok := m.Get("d"); !ok {
				t.Fatalf("master %d does not hold the failed acquire's key: the test's premise failed", i)
			}
		}
		if err := c.Submit(victim); err != nil {
			t.Fatal(err)
		}
		select {
		case <-victim.Done():
		case <-time.After(time.Minute):
			t.Fatal("the call that panicked was never answered")
		}
		for _, l := range ls {
			l.set(func(l *lossy) { l.relDown = false })
		}
		time.Sleep(5 * cleanupMaxWait)
		synctest.Wait()
		for i, m := range ms {
			if v, ok := m.Get("d"); ok {
				t.Errorf("master %d still holds d=%s, the failed acquire's key, after its background cleanup had %v with the releases getting through", i, v, 5*cleanupMaxWait)
			}
		}
	})
}

// A real panic, no hook: an AcquireAny with no permits (the engine refuses
// it before it gets here) panics in the coordinator (rand.IntN(0) in
// attemptAny), on the caller's goroutine since the mailbox is idle. The
// caller must get api.ErrInternal wrapping the runtime's panic value, and
// the coordinator must go on running calls.
func TestZeroPermitSemaphorePanicAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ms, _ := lossyCluster(t, 3, 100*time.Millisecond)
		defer c.Close()
		for _, queue := range []bool{false, true} {
			call := NewCall(AcquireAny, "semaphore", "s", "v", time.Minute, time.Millisecond)
			call.Sem, call.Permits, call.Queue = "s", 0, queue
			if err := c.Submit(call); err != nil {
				t.Fatal(err)
			}
			select {
			case <-call.Done():
			case <-time.After(time.Minute):
				t.Fatalf("a zero-permit semaphore call (queue %v) was never answered", queue)
			}
			var pe *api.PanicError
			if !errors.Is(call.Err, api.ErrInternal) || !errors.As(call.Err, &pe) {
				t.Fatalf("a zero-permit semaphore call (queue %v): %v; want api.ErrInternal", queue, call.Err)
			}
			t.Logf("queue %v: %v", queue, call.Err)
		}
		ok := lockCall("k", "v", 1)
		if err := c.Submit(ok); err != nil {
			t.Fatal(err)
		}
		<-ok.Done()
		if ok.Err != nil {
			t.Fatalf("a lock after the panics: %v", ok.Err)
		}
		unlockLeavesNoKey(t, c, ms, "k", "v")
	})
}

// panicSpan is a user's span with a bug: every event panics. The
// coordinator adds one as a call finishes (Metrics.finished), so its
// finish panics every time, its recovery's too.
type panicSpan struct{ tnoop.Span }

func (panicSpan) AddEvent(string, ...trace.EventOption) { panic(errCoordBoom) }

// A bug that panics inside finish, before the caller is signalled, panics
// again when the recovery ends the call the same way: the caller must
// still be answered (ErrInternal, not the lock the masters granted, since
// the engine cannot hand over a lock it lost track of), the keys released
// on every master, and the key's next waiter given its turn.
func TestCoordinatorPanicInFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ms, _ := lossyCluster(t, 3, 100*time.Millisecond)
		defer c.Close()
		bad := lockCall("k", "bad", 1)
		bad.Span = panicSpan{}
		next := lockCall("k", "next", 1)
		if err := c.Submit(bad); err != nil {
			t.Fatal(err)
		}
		if err := c.Submit(next); err != nil { // in k's line behind bad
			t.Fatal(err)
		}
		for _, call := range []*Call{bad, next} {
			select {
			case <-call.Done():
			case <-time.After(time.Minute):
				t.Fatalf("the call with value %q was never answered", call.Value)
			}
		}
		if !errors.Is(bad.Err, api.ErrInternal) || !errors.Is(bad.Err, errCoordBoom) {
			t.Errorf("the call whose finish panics: %v; want api.ErrInternal wrapping the panic value", bad.Err)
		}
		if next.Err != nil {
			t.Errorf("the waiter behind it: %v; want the lock (the first call's keys released)", next.Err)
		}
		synctest.Wait()
		for i, m := range ms {
			if v, ok := m.Get("k"); ok && v != "next" {
				t.Errorf("master %d holds k=%s; want the failed call's key released", i, v)
			}
		}
	})
}

// memoryMasters makes n in-memory masters, their transports and names.
func memoryMasters(n int) ([]*memory.Master, []transport.Transport, []string) {
	ms := make([]*memory.Master, n)
	ts := make([]transport.Transport, n)
	names := make([]string, n)
	for i := range ms {
		ms[i] = memory.New()
		ts[i] = ms[i].Transport()
		names[i] = fmt.Sprintf("m%d", i)
	}
	return ms, ts, names
}

// unlockLeavesNoKey unlocks key (held with value) through c and then asks
// every master to hold no key at all.
func unlockLeavesNoKey(t *testing.T, c *Cluster, ms []*memory.Master, key, value string) {
	t.Helper()
	rel := NewCall(Release, "unlock", key, value, time.Minute, time.Millisecond)
	if err := c.Submit(rel); err != nil {
		t.Fatal(err)
	}
	<-rel.Done()
	if rel.Err != nil {
		t.Fatalf("the unlock of %s: %v", key, rel.Err)
	}
	synctest.Wait()
	for i, m := range ms {
		if k := m.Len(); k != 0 {
			t.Errorf("master %d holds %d keys after the unlock of %s", i, k, key)
		}
	}
}

// tryOnce submits one TryLock of key (value "v") to c and waits a minute
// for its answer; false (with the test failed) if none came.
func tryOnce(t *testing.T, c *Cluster, key string) (*Call, bool) {
	t.Helper()
	call := NewCall(Acquire, "trylock", key, "v", time.Minute, time.Millisecond)
	call.Retry.MaxAttempts = 1
	if err := c.Submit(call); err != nil {
		t.Fatalf("Submit %q: %v", key, err)
	}
	select {
	case <-call.Done():
		return call, true
	case <-time.After(time.Minute):
		t.Errorf("the call for %q was never answered", key)
		return call, false
	}
}

// closeWithin closes c and reports whether Close returned within d (an
// error it returns fails the test); a Close that hangs is what several
// restart bugs did.
func closeWithin(t *testing.T, c *Cluster, d time.Duration) bool {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
		return true
	case <-time.After(d):
		return false
	}
}
