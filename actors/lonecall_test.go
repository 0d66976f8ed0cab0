package actors

import "testing"

// A coordinator with no call in flight runs a new call on the caller's
// goroutine; one with calls in flight leaves it to the dispatcher, so that
// calls pile up in the mailbox (many lockers). Reply batches keep the
// coordinator mailbox's rule.
func TestLoneCallRunsInline(t *testing.T) {
	co := &coordinator{}
	r := &recorder{}
	m := loneCallMailbox(co)
	var pending []func()
	m.RegisterHandlers(r, dispatcherFunc(func(fn func()) { pending = append(pending, fn) }))

	lone := &Call{}
	m.PostUserMessage(lone)
	if len(pending) != 0 || len(r.user) != 1 || r.user[0] != lone {
		t.Fatalf("idle coordinator without calls: scheduled %d times, ran %v; want the call run inline", len(pending), r.user)
	}

	co.calls.Store(1)
	busy := &Call{}
	m.PostUserMessage(busy)
	if len(pending) != 1 || len(r.user) != 1 {
		t.Fatalf("coordinator with a call in flight: scheduled %d times, ran %d; want the call left to the dispatcher", len(pending), len(r.user))
	}
	pending[0]()
	pending = pending[:0]
	if len(r.user) != 2 || r.user[1] != busy {
		t.Fatalf("ran %v; want the second call run by the dispatcher", r.user)
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
