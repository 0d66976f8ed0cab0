package engine

import "time"

// afterFunc starts the engine's scheduler timer (sched.arm), which runs
// every watched lock's events. A variable so that a test can hold the
// timer's callback back, as a starved process does: the timer is due, its
// goroutine has not run yet, and the holder asks Done meanwhile.
var afterFunc = time.AfterFunc
