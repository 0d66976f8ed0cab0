package actors

import "testing"

// A call that finds its coordinator's mailbox idle runs on the caller's
// goroutine, with or without calls in flight; one that finds it running
// waits in it for the running goroutine. Reply batches keep the
// coordinator mailbox's rule.
func TestLoneCallRunsInline(t *testing.T) {
	r := &recorder{}
	m := loneCallMailbox()
	var pending []func()
	m.RegisterHandlers(r, dispatcherFunc(func(fn func()) { pending = append(pending, fn) }))

	first := &Call{}
	m.PostUserMessage(first)
	if len(pending) != 0 || len(r.user) != 1 || r.user[0] != first {
		t.Fatalf("idle coordinator: scheduled %d times, ran %v; want the call run inline", len(pending), r.user)
	}

	// A running mailbox (as while another goroutine runs it): the call
	// is queued, neither run here nor scheduled again.
	mb := m.(*mailbox)
	mb.status.Store(running)
	busy := &Call{}
	m.PostUserMessage(busy)
	if len(pending) != 0 || len(r.user) != 1 {
		t.Fatalf("running coordinator: scheduled %d times, ran %d; want the call left in the mailbox", len(pending), len(r.user))
	}
	mb.process() // what the running goroutine does next
	if len(r.user) != 2 || r.user[1] != busy {
		t.Fatalf("ran %v; want the queued call run by the mailbox's run", r.user)
	}

	rep := &nodeReplies{items: make([]reply, 1)}
	m.PostUserMessage(rep)
	if len(pending) != 0 || len(r.user) != 3 || r.user[2] != rep {
		t.Fatalf("reply batch of one: scheduled %d times, ran %v; want it run inline as before", len(pending), r.user)
	}
	m.PostUserMessage(&nodeReplies{items: make([]reply, 2)})
	if len(pending) != 1 {
		t.Fatalf("reply batch of two: scheduled %d times; want it left to the dispatcher", len(pending))
	}
}
