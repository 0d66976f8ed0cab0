package actors

import "github.com/asynkron/protoactor-go/actor"

// giveUpAtClose drops the writer-waiting markers of a write lock finished
// because the engine closes. finish sends a writer's give-up only when not
// closing, and a writer cut by Close left its markers on the masters for
// their TTL: a key left after a failed attempt, held against readers for
// nothing (TestWriterCutByCloseLeavesNoMarker). It runs after
// releaseAtClose, so that, as in finish, the give-up follows the call's
// last cleanup release on every node; Close lets the nodes send it.
func (c *coordinator) giveUpAtClose(ctx actor.Context, call *Call, err error) {
	if call.Mode == Writer && err != nil && call.attempts > 0 && c.closing {
		c.giveUp(ctx, call)
	}
}
