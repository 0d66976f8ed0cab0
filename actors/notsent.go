package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/quorumlock/redlock/transport"
)

// unsent turns the acquires of b that the transport did not send, because
// the batch's deadline had passed before it could send them
// (transport.ErrNotSent), into errStale: like an acquire dropped from the
// queue, no master saw it and the lateness was this process's, so the
// coordinator retries the attempt without counting it instead of reading
// healthy masters as unreachable (admission control: overload is latency).
// Other ops keep their error: a release or extension not sent is retried
// or reported as before.
func unsent(b *batch) {
	for i := range b.res {
		if err := b.res[i].Err; err != nil && err != errStale && acquires(b.ops[i].Kind) && errors.Is(err, transport.ErrNotSent) {
			b.res[i].Err = errStale
		}
	}
}

// maxResends bounds the releases one Unlock sends again (resendUnsent): a
// not-sent batch costs a master timeout of lateness each time, but a
// transport that answered ErrNotSent at once would otherwise loop as fast
// as the node can send.
const maxResends = 8

// resendUnsent sends an Unlock's release that the transport did not send
// (transport.ErrNotSent: its deadline passed before it could be sent, on a
// client starved of CPU) to its master again, and reports whether it did;
// the reply then does not count. No master saw the release, and sending it
// again is safe: it deletes only this lock's value. Counting it as a
// failure left the key on that master until its TTL (after an Unlock that
// succeeded on the others, unreported) and read healthy masters as
// unreachable. The Unlock's context still bounds the wait, and after
// maxResends the reply counts as the failure it is.
func (c *coordinator) resendUnsent(ctx actor.Context, call *Call, node int, rep *reply) bool {
	if call.phase != phaseReleasing || rep.res.Err == nil || call.resent >= maxResends || !errors.Is(rep.res.Err, transport.ErrNotSent) {
		return false
	}
	call.resent++
	if rep.req.refs > 0 {
		rep.req.refs++ // one more answer owed (reqpool.go)
	}
	c.toNode(ctx, node, rep.req)
	return true
}
