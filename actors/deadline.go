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
//
// The timer runs only once the transport asks for Done: a transport that
// waits does (Redis selects on it for every batch), and one that answers at
// once, like the memory masters, only asks Err, which then reads the clock
// instead. Arming and stopping a timer per batch went into the timers' heap
// twice for a deadline that nobody watched.
type deadline struct {
	timer *time.Timer
	// The batch's send time and timeout: d is done at sent + timeout
	// (Deadline), which is only added up when a transport asks for it.
	// Err and Done compare the time since sent with the timeout instead:
	// the same instant, without a time.Time sum per batch (about 70
	// instructions, in a batch the memory masters answer in a few
	// hundred).
	sent    time.Time
	timeout time.Duration
	done    chan struct{}

	mu    sync.Mutex
	armed bool // the timer runs for this batch: Done was asked for
	err   error
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
// has, no later than now) that may run for timeout: d is done at
// sent + timeout, which Deadline reports, so a transport that sets its own
// I/O deadline from it stops no later than d is done.
func (d *deadline) armAt(sent time.Time, timeout time.Duration) {
	d.sent, d.timeout = sent, timeout
}

// left is what remains of d's time (negative once it has passed): the
// time until sent + timeout, on the monotonic clock alone (sent carries a
// reading).
func (d *deadline) left() time.Duration { return d.timeout - time.Since(d.sent) }

// disarm stops d after its batch and reports whether d can be armed again:
// only if it never ended, nor was about to (a timer that had fired).
func (d *deadline) disarm() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed && !d.timer.Stop() {
		return false
	}
	d.armed = false
	return d.err == nil
}

func (d *deadline) expire() {
	d.mu.Lock()
	d.expireLocked()
	d.mu.Unlock()
}

func (d *deadline) expireLocked() {
	if d.err == nil {
		d.err = context.DeadlineExceeded
		close(d.done)
	}
}

func (d *deadline) Deadline() (time.Time, bool) { return d.sent.Add(d.timeout), true }
func (d *deadline) Value(any) any               { return nil }

// Done arms the timer for the rest of the batch's time, the first time it is
// asked for.
func (d *deadline) Done() <-chan struct{} {
	d.mu.Lock()
	if !d.armed && d.err == nil {
		d.armed = true
		if wait := d.left(); wait > 0 {
			d.timer.Reset(wait)
		} else {
			d.expireLocked()
		}
	}
	d.mu.Unlock()
	return d.done
}

// Err reads the clock while nobody asked for Done, so that a transport that
// only polls Err still sees the deadline pass; once the timer runs, the
// timer alone ends d, so Err and Done never disagree.
func (d *deadline) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	// left reads only the monotonic clock (sent carries a reading), where
	// time.Now reads the wall clock too.
	if !d.armed && d.err == nil && d.left() <= 0 {
		d.expireLocked()
	}
	return d.err
}

func (d *deadline) String() string { return "actors.deadline" }
