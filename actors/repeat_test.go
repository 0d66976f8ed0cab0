package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A node stops its repeating server-check tick while the tick may be
// firing. Under -race that must not be a data race (a fresh-clone CI run
// reported one in protoactor's SendRepeatedly: its timer reads its state
// without an atomic load while the cancel swaps it atomically). Ticks of a
// microsecond, cancelled at once, many times, make the two meet.
func TestSendRepeatedlyCancelWhileFiring(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer sys.Root.Stop(pid)
	for range 2000 {
		cancel := sendRepeatedly(sys.Root, time.Microsecond, time.Microsecond, pid, struct{}{})
		time.Sleep(time.Microsecond)
		cancel()
	}
}

// A node runs on protoactor's synchronized dispatcher, which runs the
// actor on the goroutine that sends to it: the tick's own goroutine. The
// node may stop there and cancel the tick, from inside the tick's Send.
// That must not deadlock (the tick held its lock across Send, and cancel
// waited for it: a fresh-clone CI run hung in `redlock run`).
func TestSendRepeatedlyCancelledFromTheTick(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var cancel func()
	ready := make(chan struct{})
	cancelled := make(chan struct{})
	props := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(struct{}); ok {
			<-ready
			cancel() // on the tick's goroutine, inside its Send
			close(cancelled)
		}
	}, actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)))
	pid := sys.Root.Spawn(props)
	defer sys.Root.Stop(pid)
	cancel = sendRepeatedly(sys.Root, time.Millisecond, time.Hour, pid, struct{}{})
	close(ready)
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("cancel called from inside the tick's Send did not return in 5s: deadlock")
	}
}
