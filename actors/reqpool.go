package actors

// A coordinator reuses the requests of send that want replies: an acquire
// and an Unlock's release, the two ops of every lock cycle. They were two
// allocations of 144 bytes a cycle, 40 % of the bytes a cycle allocated on
// the memory masters at 256 lockers, where the collector and the allocator
// took 7.9 % of the CPU samples; 4.9 % once they were reused (with the
// smaller reply messages; BENCHMARKS.md, "Thirteenth session").
//
// A request may be reused only once nothing can read it again. The
// coordinator that sent it is the only one that gets its replies (each
// reply goes to the shard the request names), each node it went to
// answers it exactly once (a node never answers an op twice: restart.go),
// and no node reads a request after it has sent its reply (node.deliver
// fills every reply message before it sends one). So the coordinator counts
// the answers still owed (refs, which only it touches) and, when none is,
// the request is free. It goes back to the coordinator's free list only at
// the end of the Receive that counted its last answer: a panic later in
// that Receive makes the restart read the lost message's requests again
// (coordrestart.go), and they must still be what they were.
//
// A request whose answers do not all come (a node restarted and lost it,
// the engine closed) is never counted down; the collector takes it, as it
// took every request before. Requests sent without a reply, cleanup
// releases and resends are not reused: they are rare, and each has its own
// rules about who still holds it.

// maxFreeRequests bounds a coordinator's free list: a burst of calls must
// not keep its requests alive for the engine's lifetime.
const maxFreeRequests = 4096

// newRequest returns a zeroed request, a reused one if the free list has
// one.
func (c *coordinator) newRequest() *opRequest {
	k := len(c.freeReqs)
	if k == 0 {
		return new(opRequest)
	}
	r := c.freeReqs[k-1]
	c.freeReqs[k-1] = nil
	c.freeReqs = c.freeReqs[:k-1]
	return r
}

// answered counts one answer to r, which its reply's handling has done
// with; the request is free once every answer is in.
func (c *coordinator) answered(r *opRequest) {
	if r.refs == 0 {
		return // not reused (or a second answer, which no node sends)
	}
	r.refs--
	if r.refs == 0 {
		c.doneReqs = append(c.doneReqs, r)
	}
}

// freeDone puts the requests freed in this Receive on the free list,
// zeroed, so that they hold no Call, key or value for the collector to
// keep.
func (c *coordinator) freeDone() {
	for i, r := range c.doneReqs {
		c.doneReqs[i] = nil
		*r = opRequest{}
		if len(c.freeReqs) < maxFreeRequests {
			c.freeReqs = append(c.freeReqs, r)
		}
	}
	c.doneReqs = c.doneReqs[:0]
}
