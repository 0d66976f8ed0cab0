package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Every error the engine returns wraps exactly one of these
// (or a context error, and then its last attempt's, see Error.Unwrap), so
// callers branch with errors.Is; the wrapping *Error
// carries what each master answered. The one exception is Close's error,
// which is what closing the transports met, as they said it
// (Locker.Close).
var (
	// ErrNotAcquired: another owner holds the lock. Retrying later may work.
	ErrNotAcquired = errors.New("not acquired: the lock is held by another owner")
	// ErrQuorumUnreachable: too many masters were down, slow or in
	// quarantine to form a majority, or answered with an error reply
	// (ErrErrorReply), so the engine could not decide; or a majority
	// granted, but too late: the validity was used up. This is never
	// reported for a lock that is merely taken. When masters that answered
	// kept the majority out, with error replies or as kept from voting
	// (ErrQuarantined, ErrUnsafeMaster), the message says so in place of
	// "too few masters answered in time": the masters are up, and each
	// one's answer says why it did not vote. A majority that granted too
	// late is named so too ("N of M masters granted, but too late"), with
	// what to change: the TTL, or the client's load.
	ErrQuorumUnreachable = errors.New("quorum unreachable: too few masters answered in time")
	// ErrNotHeld: the lock is not (or no longer) held: its validity ran
	// out, an extension was refused, or it was already released.
	ErrNotHeld = errors.New("lock not held")
	// ErrInvalidArgument: a key, option or master list is malformed; the
	// message says what to fix. Retrying the same call cannot succeed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("locker closed")

	// ErrExpired: the lock's validity ran out (a cause of Lock.Err).
	ErrExpired = fmt.Errorf("%w: its validity ran out", ErrNotHeld)
	// ErrReleased: the lock was unlocked (a cause of Lock.Err).
	ErrReleased = fmt.Errorf("%w: it was released", ErrNotHeld)
	// ErrQuarantined is the answer of a master that restarted less than the
	// quarantine period ago: it does not vote, since it may have forgotten
	// locks that are still valid. Seen in Error.Masters.
	ErrQuarantined = errors.New("master in restart quarantine")
	// ErrUnsafeMaster is the answer of a master whose own configuration can
	// drop a lock's key while the lock is held (it evicts keys under a
	// memory limit, or replicates another server), or that the engine
	// cannot check for that and for being one server with another entry
	// (it refuses INFO): it does not vote until that is fixed. The message
	// says what to change on the server. Seen in Error.Masters.
	ErrUnsafeMaster = errors.New("master unsafe for locks")
	// ErrErrorReply is in the answer of a master that answered at once
	// with an error reply instead of a yes or a no: OOM (full under
	// maxmemory-policy noeviction), NOPERM (its ACL user lacks a command
	// the engine sends), BUSY, WRONGTYPE, and the like. It is up and
	// reachable; the rest of the answer is its reply, which says what to
	// fix on it. Seen in Error.Masters (the answer's text is the reply's,
	// without this sentinel's message); a top-level error never wraps it.
	ErrErrorReply = errors.New("master answered with an error reply")
)

// Answer is what one master answered in the last attempt of an operation.
type Answer uint8

const (
	// NoAnswer: no reply had arrived when the decision was made (the
	// engine decides as soon as the outcome is certain, so a live master can
	// show as pending).
	NoAnswer Answer = iota
	// Granted: the master set, released or extended the key.
	Granted
	// Refused: the master answered no (key held by another value, or
	// missing).
	Refused
	// Failed: the master gave no definite answer (unreachable, timed out,
	// error reply: ErrErrorReply, in quarantine: ErrQuarantined, unsafe:
	// ErrUnsafeMaster). The operation may still have been applied.
	Failed
)

func (a Answer) String() string {
	switch a {
	case Granted:
		return "granted"
	case Refused:
		return "refused"
	case Failed:
		return "failed"
	}
	return "pending"
}

// MasterAnswer is one master's part in an operation.
type MasterAnswer struct {
	// Master is the master's name: a Redis master's address, the name the
	// transport gives itself, or "master N" (1-based) if it gives none.
	Master string
	Answer Answer
	Err    error // set when Answer is Failed
}

// Error is the error type of every failure the engine reports: of its
// constructors, the Locker methods (but Close, see Locker.Close), Extend
// and Unlock, and the cause in Lock.Err.
// It wraps a sentinel (or the context's error) and, for a cancelled Lock,
// also the error of the last attempt, so both errors.Is(err,
// context.Canceled) and errors.Is(err, ErrNotAcquired) can hold.
type Error struct {
	// Op names what failed: "new" (engine.New, NewWithTransports,
	// NewMemory), "lock", "trylock", "lockall", "trylockall", "rlock",
	// "tryrlock", "wlock", "trywlock", "semaphore", "trysemaphore" (the
	// Locker method called; for the last two Key is then the
	// semaphore's name), "extend" (Lock.Extend, or an auto-extension), or
	// "unlock". The cause a Lock's Err reports has Op "lock" when the lock
	// expired, was released or its engine closed, whichever method took
	// it, and "extend" when an extension failed.
	Op string
	// Key is the lock's key (the first key of a multi-key lock); empty for
	// "new", and for a LockAll whose list of keys was refused.
	Key      string
	Err      error // a sentinel of this package or a context error
	Last     error // why the last attempt failed; in the chain (Unwrap) only after a context error
	Attempts int   // acquisition attempts made (the Locker methods)
	Masters  []MasterAnswer
	Detail   string // extra explanation, e.g. "validity used up by slow masters"
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("redlock: ")
	e.write(&b)
	return b.String()
}

// write writes the message without the "redlock: " prefix, so that a
// nested *Error (Last) does not repeat it.
func (e *Error) write(b *strings.Builder) {
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteString(" ")
		writeKey(b, e.Key)
	}
	b.WriteString(": ")
	e.writeSentinel(b, e.Err)
	if e.Last != nil {
		b.WriteString(" (last attempt: ")
		if le, ok := e.Last.(*Error); ok {
			le.write(b)
		} else {
			e.writeSentinel(b, e.Last) // Masters are the last attempt's
		}
		b.WriteString(")")
	}
	if e.Detail != "" {
		b.WriteString("; ")
		b.WriteString(e.Detail)
	}
	if e.Attempts > 1 {
		b.WriteString("; after ")
		b.WriteString(strconv.Itoa(e.Attempts))
		b.WriteString(" attempts")
	}
	if len(e.Masters) > 0 {
		b.WriteString("; masters: ")
		for i, m := range e.Masters {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(m.Master)
			b.WriteString("=")
			b.WriteString(m.Answer.String())
			if m.Err != nil {
				b.WriteString(" (")
				b.WriteString(m.Err.Error())
				b.WriteString(")")
			}
		}
	}
}

// writeSentinel writes err, the sentinel of e or of its last attempt. Its
// message is the sentinel's, but for an ErrQuorumUnreachable that masters
// which answered caused, with error replies or as kept from voting (restart
// quarantine, unsafe for locks), or by granting after the validity was used
// up: "too few masters answered in time" would send the reader after a
// network problem, when the masters answered.
func (e *Error) writeSentinel(b *strings.Builder, err error) {
	if err == ErrQuorumUnreachable {
		if granted := e.grantedMajority(); granted > 0 {
			// The one way a majority's grants make no lock. The
			// remedy is on the caller's side: the masters did their part.
			b.WriteString("quorum unreachable: ")
			b.WriteString(strconv.Itoa(granted))
			b.WriteString(" of ")
			b.WriteString(strconv.Itoa(len(e.Masters)))
			b.WriteString(" masters granted, but too late: " + tooLate)
			return
		}
		if replies, kept, others := e.answeredNo(); replies+kept > 0 {
			first := replies // the error replies, or the masters kept when there are none
			if replies == 0 {
				first = kept
			}
			b.WriteString("quorum unreachable: ")
			b.WriteString(strconv.Itoa(first))
			b.WriteString(" of ")
			b.WriteString(strconv.Itoa(len(e.Masters)))
			switch {
			case kept == 0:
				b.WriteString(" masters answered with an error reply, not a grant or a refusal")
			case replies == 0:
				b.WriteString(" masters answered but may not vote (in restart quarantine, or unsafe for locks: see each master's answer)")
			default:
				b.WriteString(" masters answered with an error reply and ")
				b.WriteString(strconv.Itoa(kept))
				b.WriteString(" may not vote (in restart quarantine, or unsafe for locks)")
			}
			if others > 0 {
				b.WriteString(", and ")
				b.WriteString(strconv.Itoa(others))
				b.WriteString(" more failed")
			}
			if kept == 0 || replies > 0 {
				b.WriteString(" (see each master's answer)")
			}
			return
		}
	}
	b.WriteString(err.Error())
}

// tooLate says why a majority's grants made no lock, and what to change.
// The validity counts from the send, so the wait before it is not the
// cause; the round trip and the reading of the answers are.
const tooLate = "the validity (the TTL less drift) was used up before the answers were counted;" +
	" the TTL is too short for the round trip, or this client is too loaded to read the answers in time"

// grantedMajority returns how many masters granted, when they are a
// majority, and 0 when not.
func (e *Error) grantedMajority() int {
	granted := 0
	for _, m := range e.Masters {
		if m.Answer == Granted {
			granted++
		}
	}
	if granted < len(e.Masters)/2+1 {
		return 0
	}
	return granted
}

// answeredNo counts the masters that answered with an error reply, those
// that answered but were kept from voting (ErrQuarantined,
// ErrUnsafeMaster), and the others that failed, when the first two are why
// no majority decided: the other failures alone would have left room for
// one (with more of them, too few answered whatever the rest did). It
// returns zeros when that is not so, and when a majority granted (a grant
// that came too late, which grantedMajority tells).
func (e *Error) answeredNo() (replies, kept, others int) {
	n := len(e.Masters)
	granted := 0
	for _, m := range e.Masters {
		switch {
		case m.Answer == Granted:
			granted++
		case m.Answer != Failed:
		case errors.Is(m.Err, ErrErrorReply):
			replies++
		case errors.Is(m.Err, ErrQuarantined) || errors.Is(m.Err, ErrUnsafeMaster):
			kept++
		default:
			others++
		}
	}
	if quorum := n/2 + 1; replies+kept == 0 || granted >= quorum || others > n-quorum {
		return 0, 0, 0
	}
	return replies, kept, others
}

// Unwrap lets errors.Is and errors.As see the sentinel and, for an
// operation whose context ended (Err is a context error), the last
// attempt's error: "the deadline passed, and the lock was taken" is two
// facts a caller may branch on. For any other cause (ErrClosed, an
// ErrInternal, a lock lost before an Extend) Last is in the message and in
// the field, not in the chain: a second sentinel would say what the error
// is not (a Lock cut by Close is not a taken lock, and a lost lock's
// Extend is not "unreachable, call again").
func (e *Error) Unwrap() []error {
	if e.Last != nil && (errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded)) {
		return []error{e.Err, e.Last}
	}
	return []error{e.Err}
}

// Keys longer than maxShownKey bytes are shown as their first shownKeyPrefix
// bytes (cut at a character boundary), an ellipsis and their length: keys go
// up to 1024 bytes (and a refused one may be longer), which would drown a
// log line. The Key field keeps the whole key.
const (
	maxShownKey    = 128
	shownKeyPrefix = 64
)

func writeKey(b *strings.Builder, key string) {
	if len(key) <= maxShownKey {
		b.WriteString(strconv.Quote(key))
		return
	}
	n := shownKeyPrefix
	for n > 0 && !utf8.RuneStart(key[n]) {
		n-- // key[n] continues a character: cut before its first byte
	}
	b.WriteString(strconv.Quote(key[:n] + "…"))
	b.WriteString(" (")
	b.WriteString(strconv.Itoa(len(key)))
	b.WriteString(" bytes)")
}
