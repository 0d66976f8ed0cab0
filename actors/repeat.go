package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// sendRepeatedly sends message to pid every interval, the first time after
// initial, until the returned func is called: the node's server checks.
// It is protoactor's TimerScheduler.SendRepeatedly, for now.
func sendRepeatedly(ctx actor.SenderContext, initial, interval time.Duration, pid *actor.PID, message any) scheduler.CancelFunc {
	return scheduler.NewTimerScheduler(ctx).SendRepeatedly(initial, interval, pid, message)
}
