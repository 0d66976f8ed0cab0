package actors

// The engine's own messages that may reach an actor Close has stopped: an
// INFO read's result or a batch back from its goroutine, a timer's tick, a
// node's replies to a coordinator, a cancel or a wake-up between
// coordinators. Such a dead letter is expected, and protoactor would log
// it through a throttle that starts a goroutine to wait out the throttle
// interval: Close would leave it running, and a testing/synctest bubble
// whose main goroutine returned right after Close failed with a deadlock.
// IgnoreDeadLetterLogging (actor.IgnoreDeadLetterLogging) skips the log and
// the throttle.

func (*infoResult) IgnoreDeadLetterLogging()  {}
func (*infoTick) IgnoreDeadLetterLogging()    {}
func (*batch) IgnoreDeadLetterLogging()       {}
func (*nodeReplies) IgnoreDeadLetterLogging() {}
func (*retryTick) IgnoreDeadLetterLogging()   {}
func (*cleanupTick) IgnoreDeadLetterLogging() {}
func (*cancelCall) IgnoreDeadLetterLogging()  {}
func (*wakeShard) IgnoreDeadLetterLogging()   {}
