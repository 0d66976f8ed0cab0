package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// sendRepeatedly sends message to pid every interval, the first time after
// initial, until the returned func is called: the node's server checks.
// Not protoactor's TimerScheduler.SendRepeatedly: its timer reads its state
// without an atomic load while its cancel swaps it atomically, a data race
// that -race reports when a node stops as its tick fires. Here a mutex
// guards the state and the timer, but is not held across Send: a node runs
// on the synchronized dispatcher, so Send may run it on the tick's own
// goroutine, where it may stop and cancel the tick. A tick sent just as
// the cancel comes reaches a stopped node as a dead letter, as with
// protoactor's.
func sendRepeatedly(ctx actor.SenderContext, initial, interval time.Duration, pid *actor.PID, message any) scheduler.CancelFunc {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	live := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !stopped
	}
	mu.Lock() // t is set before the first tick reads it
	defer mu.Unlock()
	t = time.AfterFunc(initial, func() {
		if !live() {
			return
		}
		ctx.Send(pid, message)
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(interval)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
