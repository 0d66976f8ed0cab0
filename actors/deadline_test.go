package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestDeadlineReusedOnlyWhileItNeverFired(t *testing.T) {
	d := newDeadline()
	defer d.timer.Stop()
	for range 3 {
		d.arm(time.Hour)
		if at, ok := d.Deadline(); !ok || time.Until(at) < 59*time.Minute {
			t.Fatalf("Deadline() = %v, %v; want about an hour from now", at, ok)
		}
		if d.Err() != nil {
			t.Fatalf("Err() = %v before the deadline", d.Err())
		}
		if !d.disarm() {
			t.Fatal("a deadline that never fired cannot be reused")
		}
	}
	d.arm(5 * time.Millisecond)
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if !errors.Is(d.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want DeadlineExceeded", d.Err())
	}
	if d.disarm() {
		t.Fatal("a fired deadline was offered for reuse")
	}
	// A fired context stays done: a transport's abandoned call relies on it.
	if !errors.Is(d.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v after disarm; want it still done", d.Err())
	}
}

// A context derived from the batch's context ends with it.
func TestDeadlinePropagatesToChildren(t *testing.T) {
	d := newDeadline()
	d.arm(10 * time.Millisecond)
	child, cancel := context.WithCancel(d)
	defer cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("child not done after the parent's deadline")
	}
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("child.Err() = %v", child.Err())
	}
}

// A transport that answers at once never asks for Done (the memory masters
// only ask Err): its batch arms no timer, and Err still sees the deadline
// pass, done for good, so the context is not offered for reuse.
func TestDeadlineWithoutDoneArmsNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeadline()
		d.arm(time.Minute)
		if d.timer.Stop() {
			t.Fatal("arming a batch's deadline started its timer before anyone asked for Done")
		}
		if d.Err() != nil {
			t.Fatalf("Err() = %v before the deadline", d.Err())
		}
		if !d.disarm() {
			t.Fatal("a deadline that never ended cannot be reused")
		}
		d.arm(time.Minute)
		time.Sleep(time.Minute)
		if !errors.Is(d.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err() = %v at the deadline; want DeadlineExceeded", d.Err())
		}
		select {
		case <-d.Done():
		default:
			t.Fatal("Err reported the deadline but Done is not closed")
		}
		if d.disarm() {
			t.Fatal("an ended deadline was offered for reuse")
		}
	})
}

// Done asked for after the deadline has passed is closed at once.
func TestDeadlineDoneAfterItPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDeadline()
		d.arm(time.Second)
		time.Sleep(2 * time.Second)
		select {
		case <-d.Done():
		default:
			t.Fatal("Done asked for after the deadline is not closed")
		}
		if !errors.Is(d.Err(), context.DeadlineExceeded) || d.disarm() {
			t.Fatalf("Err() = %v, and the ended deadline was offered for reuse", d.Err())
		}
	})
}
