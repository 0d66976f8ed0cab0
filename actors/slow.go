package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
)

// Slow masters (admission control: overload is latency, ARCHITECTURE.md).
//
// When a batch times out, the engine cannot tell a master that is alive but
// slow (starved of CPU, as on a loaded machine, and answering later) from
// one that is gone without a reset (a partition, a paused process): neither
// has said anything yet. It can tell them apart by what comes next: a slow
// master answers again, a gone one stays silent. So a node times its
// master's silence, from the send of the first batch that timed out since
// the master last gave a definite answer, and a timeout counts as a failure
// only once that silence reaches the call's TTL (silenceLimit). Before
// that the op is slow: the coordinator retries an acquire without counting
// the attempt (as for one that waited past its limit in a queue) and sends
// an unconfirmed release again, so that an overloaded master costs latency
// (until the caller's context ends, or one call has waited on slow masters
// for a TTL: stillSlow), not ErrQuorumUnreachable. A master
// whose connection is refused or reset fails at once as before
// (transport.ErrUnavailable is not a timeout), and one silent for a TTL is
// down: from then on each timeout on it counts at once, so only the first
// call after a master vanished pays the wait, and the master is up again
// with its first answer.
//
// Safety does not depend on any of this: a slow acquire is a failed op to
// the quorum count and to the cleanup (its SET may land later, so its
// master is released like any other after a failed attempt), and a grant's
// validity counts from its batch's send whatever happened before.

// slowError is a timeout of a master that is not known to be down.
type slowError struct {
	err    error
	silent time.Duration
}

func (e *slowError) Error() string {
	return fmt.Sprintf("slow (silent for %v, under the TTL it takes to count as down: overload, retried): %v", e.silent.Round(time.Millisecond), e.err)
}

func (e *slowError) Unwrap() error { return e.err }

// timeoutError is a master's silence told as the deadline that passed: a
// caller that set no deadline of its own would otherwise read a bare
// "context deadline exceeded" without knowing whose, or what sets it.
type timeoutError struct {
	err     error
	timeout time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no answer within the master timeout (%v, api.WithMasterTimeout): %v", e.timeout, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

func isSlow(err error) bool {
	_, ok := err.(*slowError)
	return ok
}

// silenceLimit is how long a master may stay silent, while the engine waits
// on it, before its timeouts count as failures for call: the call's TTL.
// Within it a slow master's answer can still serve the call (an acquire's
// SET may wait in a node's queue as long, queueLimit); a master that said
// nothing for a whole TTL holds none of the call's keys any more.
func silenceLimit(call *Call) time.Duration { return call.TTL }

// timedOut reports whether err is a master's silence: the batch's deadline
// passed with no answer. Not a refused or broken connection (down, at
// once), and not a batch never sent (the client's lateness, which says
// nothing about the master).
func timedOut(err error) bool {
	return err != nil && err != errStale && errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, transport.ErrNotSent) && !errors.Is(err, transport.ErrUnavailable)
}

// hear updates the node's view of its master's silence from a returned
// batch, and marks the batch's timed-out acquires and releases slow while
// that silence is under their call's limit.
func (n *node) hear(b *batch) {
	for i := range b.res {
		if b.res[i].Err == nil {
			n.silentSince = time.Time{} // it answers
			return
		}
	}
	var now time.Time
	for i, r := range b.reqs {
		err := b.res[i].Err
		if !timedOut(err) {
			continue
		}
		if now.IsZero() {
			now = time.Now()
			if n.silentSince.IsZero() {
				n.silentSince = b.sent
			}
		}
		err = &timeoutError{err: err, timeout: n.timeout}
		b.res[i].Err = err
		if !r.slowable {
			continue
		}
		if silent := now.Sub(n.silentSince); silent < r.op.TTL { // the call's silenceLimit
			b.res[i].Err = &slowError{err: err, silent: silent}
		}
	}
}

// resendSlow is the release's part: once every master answered an
// Unlock's release and the outcome hangs on masters that were slow, it
// sends the release again to those, keeping the other answers, and reports
// true. A master's refusal of a release sent again counts as released: the
// release it was sent first, and applied late, may be what deleted the key.
func (c *coordinator) resendSlow(ctx actor.Context, call *Call) bool {
	if call.granted >= c.quorum || call.granted+call.failed < c.quorum || call.errs == nil {
		return false
	}
	var mask uint64
	for i, err := range call.errs {
		if isSlow(err) {
			mask |= 1 << i
			call.errs[i] = nil
			call.failed--
			call.replied--
		}
	}
	if mask == 0 {
		return false
	}
	call.answered &^= mask
	r := &opRequest{
		call: call,
		gen:  call.life,
		hash: call.hash,
		seq:  call.seq,
		// TTL: the silence limit for the node (hear); a release ignores it.
		op:       transport.Op{Kind: call.Mode.release(), Key: call.Key, Keys: call.Keys, Value: call.Value, TTL: silenceLimit(call)},
		slowable: true,
		shard:    c.shard,
		reply:    true,
		resent:   true,
	}
	for i := range c.nodes {
		if mask&(1<<i) != 0 {
			c.toNode(ctx, i, r)
		}
	}
	return true
}

// lateDetail tells when the answers that came too late were counted,
// against what the validity had: the numbers a caller must fit a TTL to.
func lateDetail(what string, call *Call, now time.Time, advice string) string {
	d := fmt.Sprintf("%s, but too late: %v after the send, against a TTL of %v less %v of drift", what, now.Sub(call.from()), call.TTL, call.Drift)
	if advice != "" {
		d += "; " + advice
	}
	return d
}

// tooLateAdvice is what to change when a majority answered too late; an
// acquire's error headline says it (api.Error), an Extend's, ErrNotHeld,
// cannot. The validity counts from the send, so the wait before it is not
// the cause.
const tooLateAdvice = "the TTL is too short for the round trip, or this client is too loaded to read the answers in time"

// tooLate reports whether a majority's grant came too late for validity
// because of overload: the round trip outlived the master timeout, which
// only a reply read late (the transport's late-reply wait) or a backlog in
// this process can do. A TTL too short for one round trip within the
// master timeout stays a failure, or such a call would retry for ever.
func (c *coordinator) tooLate(call *Call, now time.Time) bool {
	return now.Sub(call.from()) > c.masterTimeout
}

// resentCounts reports whether a refusal of call's release sent again
// counts as released: only if the Unlock began within the lock's validity.
// Past Until the keys may have expired on their own, and a refusal is then
// most likely that; counting it made an Unlock of a lock that had expired
// everywhere report nil ("a majority released it") instead of ErrNotHeld
// whenever a majority was slow to answer its first release.
func resentCounts(call *Call) bool {
	return call.Until.IsZero() || call.t1.Before(call.Until)
}

// stillSlow turns rep's slow timeout into the failure it is once call has
// waited on slow masters for its silence limit, counted from the send of
// its first op that met one (Call.slowSince; a phase that meets none starts
// the count again). The node's silence clock alone does not bound a call:
// a master that answers other keys' ops resets it, and one that never
// answers this call's key (a paused shard behind a transport that serves
// several) kept a TryLock retrying, and an Unlock resending, without end.
func (c *coordinator) stillSlow(call *Call, rep *reply, sent time.Time) {
	se, ok := rep.res.Err.(*slowError)
	if !ok {
		return
	}
	if overloadSpent(call, sent) {
		rep.res.Err = se.err
	}
}

// overloadSpent starts call's count of overload (Call.slowSince) at sent,
// or now for an op never sent, unless one is running, and reports whether
// it has lasted the call's silence limit: the bound that slow masters
// (stillSlow) and dropped or unsent acquires (stillStale) share.
func overloadSpent(call *Call, sent time.Time) bool {
	if call.slowSince.IsZero() {
		call.slowSince = sent
		if call.slowSince.IsZero() {
			call.slowSince = time.Now()
		}
	}
	return time.Since(call.slowSince) >= silenceLimit(call)
}

// stillLate records that call's attempt was granted too late (tooLate) and
// reports whether it may still be retried uncounted: for a TTL at a
// stretch from the first such attempt, as for slow masters (stillSlow).
// Grants that are always read past the TTL (a client starved for good)
// would otherwise retry a TryLock with no deadline for ever; after the
// stretch the attempt fails as unreachable, as before slow masters.
func stillLate(call *Call, now time.Time) bool {
	call.stale++ // the phase met overload: begin keeps the count going
	if call.slowSince.IsZero() {
		call.slowSince = now
	}
	return now.Sub(call.slowSince) < silenceLimit(call)
}
