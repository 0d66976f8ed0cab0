package actors

import (
	"errors"

	"github.com/quorumlock/redlock/transport"
)

// Releases an Unlock leaves behind (SAFETY.md, "A key after Unlock (keys16)").
//
// An Unlock waits for every master, but a master's answer may be a timeout:
// its release may be applied later, or, on a client starved of CPU, may
// never have been written (a transport may fail such a batch as "no
// answer" rather than transport.ErrNotSent; transport/redis did until
// notsent24, for a batch that waited past its deadline for the
// connection's write lock, or whose write found the deadline passed). Once a
// majority released, resendSlow does not send it again (the outcome does not
// hang on it), and the key stayed on that master for its TTL after an Unlock
// that returned nil, against the house rule and api.Lock.Unlock's "releases
// the lock on every master".
//
// So such masters join the background cleanup that failed acquires use
// (coordinator.leave, cleanLater): the release is sent again from a master
// timeout after the Unlock, backing off to cleanupMaxWait, until a master
// answers it or the keys must have expired. It deletes only this lock's
// value, which nothing sets again after Unlock, so sending it late or twice
// is harmless. Only masters that were slow (a timeout while the master is
// not known down, slow.go) or had not answered when the Unlock ended are
// kept, and those whose release the client did not send resendUnsent's
// maxResends times (the master never saw it; review17). A master that
// refused the connection or was silent for a TTL is down, and keeping
// every Unlock's release for it would turn a minority outage into a
// background load growing with the Unlock rate. For the same reason a
// resend that meets a master now down drops that master (cleaned).
// The Unlock's result does not change: it still counts the first answers.

// unlockLeft hands the masters whose answer to call's release, an Unlock's,
// was slow or missing to the background cleanup; finish then keeps the
// call pending as for a failed acquire. While the engine closes, the slow
// ones get a last release from releaseAtClose instead, and those not
// answered keep theirs, still out (Close waits for them).
func (c *coordinator) unlockLeft(call *Call) {
	if call.Kind != Release || call.phase != phaseReleasing || call.left != nil {
		return
	}
	all := uint64(1)<<len(c.nodes) - 1
	out := all &^ call.answered // releases not answered yet
	var slow uint64
	for i, err := range call.errs {
		if unlockRetries(err) {
			slow |= 1 << i
		}
	}
	if slow|out == 0 {
		return
	}
	call.left = &leftovers{mask: slow | out}
	if c.closing {
		call.left.cleaning = out // still out: Close waits for them; releaseAtClose sends the rest
	}
}

// unlockGivesUp reports whether a background release of an Unlock stops at
// master: it answered with an error other than a slow timeout, so the
// master is down (or refused at once), and it is left to the key's TTL.
func unlockGivesUp(call *Call, err error) bool {
	return call.Kind == Release && err != nil && !unlockRetries(err)
}

// unlockRetries reports whether an Unlock's release that failed with err
// is sent again in the background: a slow timeout, a release the client
// did not send (transport.ErrNotSent, past resendUnsent's maxResends), or
// one the master refused unapplied (transport.ErrNotApplied: a NOSCRIPT,
// MOVED or ASK the transport could not follow within the batch). The last
// two leave the key there on a master that is up (review17, notapplied23:
// it stayed for its TTL after an Unlock that returned nil).
func unlockRetries(err error) bool {
	return isSlow(err) || errors.Is(err, transport.ErrNotSent) || errors.Is(err, transport.ErrNotApplied)
}
