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
// that -race reports when a node stops as its tick fires. Here one mutex
// orders the tick and the cancel; Send only enqueues, so holding it across
// Send cannot wait on the actor that cancels.
func sendRepeatedly(ctx actor.SenderContext, initial, interval time.Duration, pid *actor.PID, message any) scheduler.CancelFunc {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock() // t is set before the first tick reads it
	defer mu.Unlock()
	t = time.AfterFunc(initial, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		ctx.Send(pid, message)
		t.Reset(interval)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
