package actors

import (
	"context"
	"errors"
	"testing"
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
