// Package iotrace is a diagnostic hook into the Redis transport: it says
// where the time went for a batch that failed because its context ended, so
// that a test under overload can tell a master that did not answer in time
// from a client that did not read (or send) in time. Nothing is recorded
// unless a hook is set; tests set it.
package iotrace

import (
	"sync/atomic"
	"time"
)

// Stage is where a batch was when its context ended.
type Stage int

const (
	// BeforeWrite: the context had ended before the transport began to send
	// (the deadline fired while the caller's goroutine had not reached the
	// transport's write).
	BeforeWrite Stage = iota
	// WaitingToWrite: the context ended while the batch waited for the
	// connection's write lock (another batch was being written).
	WaitingToWrite
	// Write: the write itself met the deadline (nothing or part sent).
	Write
	// AwaitingReply: the batch was written and its reply had not been
	// handed to it when the context ended.
	AwaitingReply
)

func (s Stage) String() string {
	switch s {
	case BeforeWrite:
		return "before write"
	case WaitingToWrite:
		return "waiting to write"
	case Write:
		return "write"
	case AwaitingReply:
		return "awaiting reply"
	}
	return "unknown"
}

// Late is one batch failed because its context ended.
type Late struct {
	Stage    Stage
	Deadline time.Time // the context's deadline
	Written  time.Time // when its bytes went out (zero unless AwaitingReply)
	Failed   time.Time // when the transport gave up on it
	// InSocket: bytes from the master waited unread in the socket (FIONREAD)
	// when the context ended; InBuffer: bytes already read from the socket
	// into the reader's buffer but not yet decoded then.
	InSocket bool
	InBuffer bool
	// Read is set (Unix nanoseconds) by the connection's reader when it
	// later read this batch's reply; 0 if it never did.
	Read atomic.Int64
}

// Hook, when set, is called for every batch the transport fails because its
// context ended.
var Hook atomic.Pointer[func(*Late)]

// On reports whether a hook is set.
func On() bool { return Hook.Load() != nil }

// Report calls the hook, if set.
func Report(l *Late) {
	if h := Hook.Load(); h != nil {
		(*h)(l)
	}
}
