package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// recorder is a MessageInvoker that logs what it is given.
type recorder struct {
	mu     sync.Mutex
	user   []any
	sys    []any
	failed []any
	onUser func(any)
}

func (r *recorder) InvokeSystemMessage(m any) {
	r.mu.Lock()
	r.sys = append(r.sys, m)
	r.mu.Unlock()
}

func (r *recorder) InvokeUserMessage(m any) {
	if r.onUser != nil {
		r.onUser(m)
	}
	r.mu.Lock()
	r.user = append(r.user, m)
	r.mu.Unlock()
}

func (r *recorder) EscalateFailure(reason, m any) {
	r.mu.Lock()
	r.failed = append(r.failed, reason, m)
	r.mu.Unlock()
}

func TestQueueIsFIFOAcrossGrowth(t *testing.T) {
	var q queue
	next, want := 0, 0
	// Interleave pushes and pops so the ring wraps before it grows.
	for round := range 50 {
		for range round % 7 * 5 {
			q.push(next)
			next++
		}
		for range round % 3 * 4 {
			v := q.pop()
			if v == nil {
				break
			}
			if v.(int) != want {
				t.Fatalf("popped %v, want %d", v, want)
			}
			want++
		}
	}
	for v := q.pop(); v != nil; v = q.pop() {
		if v.(int) != want {
			t.Fatalf("popped %v, want %d", v, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("popped %d of %d", want, next)
	}
}

func TestMailboxSystemFirstAndSuspend(t *testing.T) {
	r := &recorder{}
	m := newMailbox()
	// A dispatcher that runs nothing until the test says so, so that both
	// kinds of message are queued when the mailbox runs.
	var pending []func()
	m.RegisterHandlers(r, dispatcherFunc(func(fn func()) { pending = append(pending, fn) }))
	m.PostUserMessage("u1")
	m.PostSystemMessage("s1")
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("u2")
	if len(pending) != 1 {
		t.Fatalf("scheduled %d times; want once while running", len(pending))
	}
	pending[0]()
	if len(r.sys) != 1 || r.sys[0] != "s1" || len(r.user) != 0 {
		t.Fatalf("sys %v user %v; want the system message first and no user message while suspended", r.sys, r.user)
	}
	if m.UserMessageCount() != 2 {
		t.Fatalf("UserMessageCount = %d; want 2", m.UserMessageCount())
	}
	pending = pending[:0]
	m.PostSystemMessage(&actor.ResumeMailbox{})
	if len(pending) != 1 {
		t.Fatalf("a resume did not schedule the mailbox")
	}
	pending[0]()
	if len(r.user) != 2 || r.user[0] != "u1" || r.user[1] != "u2" {
		t.Fatalf("user %v; want u1, u2 after resume", r.user)
	}
}

func TestMailboxEscalatesAPanic(t *testing.T) {
	r := &recorder{onUser: func(m any) {
		if m == "bad" {
			panic("boom")
		}
	}}
	m := newMailbox()
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(300))
	m.PostUserMessage("bad")
	m.PostUserMessage("good")
	if len(r.failed) != 2 || r.failed[0] != "boom" || r.failed[1] != "bad" {
		t.Fatalf("escalated %v; want boom for the message bad", r.failed)
	}
	if len(r.user) != 1 || r.user[0] != "good" {
		t.Fatalf("user %v; want the next message still delivered", r.user)
	}
}

// Many senders on the default dispatcher: every message is delivered once,
// each sender's in order, and one at a time.
func TestMailboxConcurrentSenders(t *testing.T) {
	const senders, each = 8, 2000
	var inside atomic.Int32
	var overlapped atomic.Bool
	last := make([]int, senders)
	for i := range last {
		last[i] = -1
	}
	done := make(chan struct{})
	count := 0
	r := &recorder{}
	r.onUser = func(v any) {
		if inside.Add(1) != 1 {
			overlapped.Store(true) // two goroutines in the actor at once
		}
		defer inside.Add(-1)
		m := v.([2]int)
		if m[1] != last[m[0]]+1 {
			t.Errorf("sender %d: got %d after %d", m[0], m[1], last[m[0]])
		}
		last[m[0]] = m[1]
		if count++; count == senders*each {
			close(done)
		}
	}
	m := newMailbox()
	m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				m.PostUserMessage([2]int{s, i})
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("%d of %d messages delivered", len(r.user), senders*each)
	}
	if overlapped.Load() {
		t.Fatal("two messages were processed at once")
	}
}

type dispatcherFunc func(func())

func (d dispatcherFunc) Schedule(fn func()) { d(fn) }
func (dispatcherFunc) Throughput() int      { return 300 }

// A coordinator's mailbox runs a node's reply batch of one reply on the
// poster's goroutine when it is idle, and leaves calls, larger reply
// batches, and anything that finds it running, to the dispatcher.
func TestCoordinatorMailboxRunsRepliesInline(t *testing.T) {
	r := &recorder{}
	m := newCoordinatorMailbox()
	var pending []func()
	m.RegisterHandlers(r, dispatcherFunc(func(fn func()) { pending = append(pending, fn) }))
	rep := &nodeReplies{items: make([]reply, 1)}
	m.PostUserMessage(rep)
	if len(pending) != 0 || len(r.user) != 1 || r.user[0] != rep {
		t.Fatalf("idle mailbox, reply batch: scheduled %d times, ran %v; want it run inline", len(pending), r.user)
	}
	call := &Call{}
	m.PostUserMessage(call)
	if len(pending) != 1 || len(r.user) != 1 {
		t.Fatalf("idle mailbox, call: scheduled %d times, ran %d; want it left to the dispatcher", len(pending), len(r.user))
	}
	m.PostUserMessage(rep) // the mailbox is running (scheduled): queued behind the call
	if len(pending) != 1 || len(r.user) != 1 {
		t.Fatalf("running mailbox, reply batch: scheduled %d times, ran %d; want it queued", len(pending), len(r.user))
	}
	pending[0]()
	if len(r.user) != 3 || r.user[1] != call || r.user[2] != rep {
		t.Fatalf("ran %v; want the call, then the reply batch, in order", r.user)
	}
	pending = pending[:0]
	m.PostUserMessage(&nodeReplies{items: make([]reply, 2)})
	if len(pending) != 1 || len(r.user) != 3 {
		t.Fatalf("idle mailbox, two replies: scheduled %d times, ran %d; want it left to the dispatcher", len(pending), len(r.user))
	}
}
