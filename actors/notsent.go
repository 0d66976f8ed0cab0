package actors

import (
	"errors"

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
