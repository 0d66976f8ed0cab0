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
