package actors

import (
	"context"
	"sync"
	"time"
)

// deadline is the context a node's I/O worker hands the transport for one
// batch: done at the batch's deadline, never cancelled otherwise. A worker
// reuses it for its next batch when the timer never fired, so a batch costs
// no context, timer or channel: context.WithTimeout per batch was four
// allocations, most of what a lock cycle allocated at concurrency 1.
//
// A context whose timer fired (or was firing when Do returned) is retired,
// never re-armed: a transport may still hold it (the Redis transport leaves
// an abandoned call on its own goroutine, which relies on its context being
// done for good), and a done context must stay done. One that never fired
// was used by a Do that has returned, and the transport contract says Do does
// not use an unfinished context after returning.
type deadline struct {
	timer *time.Timer
	at    time.Time
	done  chan struct{}

	mu  sync.Mutex
	err error
}

func newDeadline() *deadline {
	d := &deadline{done: make(chan struct{})}
	d.timer = time.AfterFunc(time.Hour, d.expire)
	d.timer.Stop()
	return d
}

// arm starts d for a batch that may run for timeout, and returns the time it
// started: the batch's send time.
func (d *deadline) arm(timeout time.Duration) time.Time {
	now := time.Now()
	d.armAt(now, timeout)
	return now
}

// armAt starts d for a batch sent at sent (a clock read the caller already
// has, no later than now) that may run for timeout. Deadline reports
// sent + timeout, no later than the timer fires, which counts timeout from
// now: a transport that sets its own I/O deadline from it stops no later
// than d is done.
func (d *deadline) armAt(sent time.Time, timeout time.Duration) {
	d.at = sent.Add(timeout)
	d.timer.Reset(timeout)
}

// disarm stops d after its batch and reports whether d can be armed again.
func (d *deadline) disarm() bool {
	return d.timer.Stop()
}

func (d *deadline) expire() {
	d.mu.Lock()
	if d.err == nil {
		d.err = context.DeadlineExceeded
		close(d.done)
	}
	d.mu.Unlock()
}

func (d *deadline) Deadline() (time.Time, bool) { return d.at, true }
func (d *deadline) Done() <-chan struct{}       { return d.done }
func (d *deadline) Value(any) any               { return nil }

func (d *deadline) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *deadline) String() string { return "actors.deadline" }
