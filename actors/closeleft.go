package actors

import "github.com/asynkron/protoactor-go/actor"

// releaseAtClose makes the last attempt at what call's ended attempts left
// on masters whose releases did not get through, when call is finished
// because the engine closes (Close: "lets the releases that this sends
// reach the masters"). A call that ends without the lock otherwise keeps
// releasing in the background (finish's pending), and cleanLast makes the
// final attempt at those; but a call finished while the engine closes
// joins no background cleanup, and one that was waiting for its next
// attempt, which would have sent the release again ahead of its SET, never
// makes it. Its key stayed on the master for its TTL after Close. The same
// last release goes to the masters that were slow to an Unlock finished
// while closing (unlockLeft). Releases still out (cleaning) are not sent
// twice: Close waits for them.
func (c *coordinator) releaseAtClose(ctx actor.Context, call *Call, err error) {
	if l := call.left; l != nil && leftBehind(call, err) && c.closing {
		if m := l.mask &^ l.cleaning; m != 0 {
			c.release(ctx, call, m)
		}
	}
}

// leftBehind reports whether what call's marked masters hold is left for it
// to release once it finishes: the keys of an acquire that failed, and those
// of an Unlock whose releases timed out (unlockleft.go). The keys of an
// acquire that won belong to its lock, and its Unlock releases them.
func leftBehind(call *Call, err error) bool { return err != nil || call.Kind == Release }
