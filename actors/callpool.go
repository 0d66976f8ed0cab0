package actors

import (
	"sync"
	"time"
)

// Reused Calls (SAFETY.md, "Reused Calls: why no stale reference acts").
//
// A lock cycle used to allocate two Calls (the Lock's and the Unlock's) and
// their done channels: 63 % of the bytes a cycle allocated at 256 lockers on
// the memory masters, and so most of the collector's work. The engine now
// takes them from a pool (GetCall) and gives them back (Release).
//
// The result is signalled without allocating where the caller needs no
// channel (a context that never ends, the common case of engine.run): Submit
// adds one to the Call's WaitGroup, finish takes it away, the caller Waits.
// Where the caller must select on its context as well, it asks for a done
// channel (MakeDone) before Submit, and that channel is not reused: each
// lifetime makes its own and closes it.
// A channel belongs to the testing/synctest bubble of the goroutine that made
// it, and any use of it from outside that bubble is a fatal error of the
// runtime (not a panic): a Call pooled from a test in a bubble and reused by
// the next test, or by a user's code and a user's synctest test in one
// process, would kill the process. Nothing public tells a goroutine which
// bubble it is in, and a channel made outside every bubble would not block
// durably inside one (synctest.Wait would never see the caller idle), so the
// channel is made afresh, on the caller's goroutine, in the caller's bubble.
// A WaitGroup has no such trouble: it joins the bubble of its Add and leaves
// it when its count is back at zero and its waiter has returned (sync's
// waitgroup.go), which is before Release.
//
// A Call is referred to long after its result: by replies still on their way
// from slow masters, by timer messages a cancelled timer had already sent, by
// a late cancel. So a Call has a generation, gen, which the coordinator that
// ran it bumps when it retires the Call, at the end of the Receive in which it
// stopped referring to it from its own state (finished and no background
// cleanup left). Every message that names a Call carries the gen of the
// lifetime it belongs to (Call.life), and its handler, which is always that
// same coordinator, compares before reading anything else: equal means this
// coordinator has not retired the Call, so it is still its own; different
// means the message is stale and is dropped. Node actors never read the Call
// at all (opRequest copies what they need). The Call goes back to the pool
// only once both its caller and its coordinator have let go (refs).

// callPool holds Calls for GetCall. get and put are variables so that a test
// can make reuse deterministic (sync.Pool gives no promise of handing back a
// given Call, and drops a share of them under the race detector).
var (
	callPool = sync.Pool{New: func() any { return new(Call) }}
	getCall  = func() *Call { return callPool.Get().(*Call) }
	putCall  = func(c *Call) { callPool.Put(c) }
)

// GetCall is NewCall for a Call that is reused: the caller must wait for its
// result (Done) if it submitted it, read what it needs, and then call
// Release. It must not keep the Call, nor anything of it that a
// later lifetime would overwrite, after Release.
func GetCall(kind CallKind, op, key, value string, ttl, drift time.Duration) *Call {
	c := getCall()
	c.Kind, c.Op, c.Key, c.Value, c.TTL, c.Drift = kind, op, key, value, ttl, drift
	c.pooled = true
	c.refs.Store(1) // the caller's
	return c
}

// Release gives a Call of GetCall back once its caller is done with it; a
// Call of NewCall is left to the collector.
func (c *Call) Release() {
	if c.pooled && c.refs.Add(-1) == 0 {
		c.recycle()
	}
}

// submitted records the lifetime the coordinator is handed: the messages of
// this submission carry life, and the coordinator holds a reference until it
// retires the Call. Called by Submit on the caller's goroutine, which owns
// the Call alone until it sends it.
func (c *Call) submitted() {
	c.life = c.gen.Load()
	c.refs.Add(1)
	if c.done == nil {
		c.wg.Add(1)
	}
}

// MakeDone gives a Call of GetCall a done channel, for a caller that must
// select on it (Done); only before Submit. Without it, the caller waits with
// Wait, which allocates nothing.
func (c *Call) MakeDone() {
	if c.done == nil {
		c.done = make(chan struct{}) // never reused: see above
	}
}

// Wait blocks until the call has its result, whichever way it signals it.
func (c *Call) Wait() {
	if c.done != nil {
		<-c.done
		return
	}
	c.wg.Wait()
}

// signal tells the caller the result is there.
func (c *Call) signal() {
	if c.done != nil {
		close(c.done)
		return
	}
	c.wg.Done()
}

// current reports whether a message stamped with gen belongs to the Call's
// lifetime that its coordinator has not retired. Only the coordinator that
// ran that lifetime may ask (see SAFETY.md): it alone bumps gen while the
// lifetime lasts, so a true answer cannot go stale while it acts on it.
func (c *Call) current(gen uint64) bool { return c.gen.Load() == gen }

// recycle resets a Call that nobody holds and puts it in the pool. A Call
// with Keys is not reused: a multi-key Release names itself to other shards
// (wakeShard), whose coordinators read its Keys on their own goroutines
// without a generation check, so such a Call is left to the collector.
func (c *Call) recycle() {
	if !c.pooled || c.Keys != nil {
		return
	}
	c.done = nil
	c.callState = callState{}
	putCall(c)
}

// retire marks call as no longer referred to by the coordinator's state:
// finished, and with no background cleanup pending. The coordinator lets it
// go at the end of the current Receive (retireAll), so that nothing on the
// stack of this Receive can touch a Call that another goroutine has
// already taken from the pool. Calls of NewCall are never retired: they
// are never reused, and an AcquireAny's children go on being used after
// they finish (discard).
func (c *coordinator) retire(call *Call) {
	if !call.pooled || call.any != nil || call.parent != nil {
		// Not reused: an AcquireAny and its children refer to each other
		// after they finish (childDone, discard, Won); the engine takes
		// those from NewCall, and one from GetCall is left to the
		// collector rather than reasoned about.
		return
	}
	if _, ok := c.pending[call]; ok || call.retiring {
		return // retired when its cleanup ends; or retired already
	}
	call.retiring = true // once per lifetime: refs counts one reference
	c.retired = append(c.retired, call)
}

// retireAll bumps the generation of the Calls retired in this Receive, which
// makes every message still naming them stale, and drops the coordinator's
// reference.
func (c *coordinator) retireAll() {
	for i, call := range c.retired {
		c.retired[i] = nil
		call.stop() // disarm any timer; a tick it already sent is stale by gen
		call.gen.Add(1)
		if call.refs.Add(-1) == 0 {
			call.recycle()
		}
	}
	c.retired = c.retired[:0]
}

// unpend removes a finished call's background cleanup and retires it.
func (c *coordinator) unpend(call *Call) {
	delete(c.pending, call)
	if call.phase == phaseDone {
		c.retire(call)
	}
}
