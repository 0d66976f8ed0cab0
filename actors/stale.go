package actors

import (
	"errors"
	"time"
)

// errStaleTooLong is an acquire's errStale once its call has met overload
// for its TTL at a stretch (stillStale): a failure, no longer an uncounted
// retry.
var errStaleTooLong = errors.New("timed out waiting in the node's queue, or not sent in time, after a TTL of overload at a stretch: counted as a failure")

// stillStale is stillSlow's bound for the other kind of overload: an
// acquire the node dropped from its queue (errStale) or the transport did
// not send (transport.ErrNotSent, which unsent turns into errStale). Such
// an attempt is retried without counting it, and nothing else ended the
// retries: a TryLock with no deadline on a client whose batches were never
// sent in time retried for as long as the process ran, where
// api.Locker.TryLock promises at most about a TTL of overload, then
// ErrQuorumUnreachable. The count is the call's (Call.slowSince, shared
// with slow masters and late grants, since all three are one overload):
// from the first such op's send (or its drop, for one never sent), a TTL at
// most, after which the drop is a failure.
func stillStale(call *Call, rep *reply, sent time.Time) {
	if rep.res.Err != errStale || (call.phase != phaseAcquiring && call.phase != phaseFencing) {
		return
	}
	if overloadSpent(call, sent) {
		rep.res.Err = errStaleTooLong
	}
}
