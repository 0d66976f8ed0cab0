package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// A message of the engine's own that reaches an actor Close has stopped
// (an INFO read's result, a batch back from its I/O goroutine, a timer's
// tick, a reply) is expected there, and must leave nothing running: a
// dead letter that protoactor logs starts its throttle goroutine, which
// waits out the throttle interval. Inside a testing/synctest bubble,
// whose clock stops when its main goroutine returns, that goroutine
// failed a test that returned right after Close: "deadlock: main bubble
// goroutine has exited but blocked goroutines remain" (engine's
// TestAutoExtendKeepsLock at -cpu 4, an infoResult sent as its node
// stopped). Every such message is sent here to every stopped actor, and
// the bubble ends at once.
func TestLateMessagesLeaveNothingRunning(t *testing.T) {
	msgs := map[string]func() any{
		"infoResult":  func() any { return &infoResult{} },
		"infoTick":    func() any { return &infoTick{} },
		"batch":       func() any { return &batch{} },
		"nodeReplies": func() any { return &nodeReplies{} },
		"retryTick":   func() any { return &retryTick{} },
		"cleanupTick": func() any { return &cleanupTick{} },
		"cancelCall":  func() any { return &cancelCall{} },
		"wakeShard":   func() any { return &wakeShard{} },
	}
	for name, msg := range msgs {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ts := []transport.Transport{memory.New().Transport(), memory.New().Transport(), memory.New().Transport()}
				c, err := Start(Config{Transports: ts, Names: []string{"a", "b", "c"}, MasterTimeout: 100 * time.Millisecond, MaxBatch: 64, MaxInFlight: 1, Coordinators: 1})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				for _, pid := range append(append(c.nodes[:0:0], c.nodes...), c.coords...) {
					c.system.Root.Send(pid, msg())
				}
				synctest.Wait()
			})
		})
	}
}
