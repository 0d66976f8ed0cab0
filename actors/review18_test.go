package actors

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// rootSender is the part of an actor.Context that coordinator.toNode uses
// (Send), for senders that are goroutines of the test, not actors.
type rootSender struct {
	actor.Context
	root *actor.RootContext
}

func (s rootSender) Send(pid *actor.PID, msg any) { s.root.Send(pid, msg) }

// Many coordinators hand ops to one node through its intake
// (coordinator.toNode) while the node takes them, with one batch in flight:
// the node runs on the senders' goroutines for the wake-ups and on its
// worker's for every returned batch, so adds race with takes and with the
// flag that says whether the next add must wake the node. Once every sender
// is done and everything is idle (synctest.Wait: no sleep), every op must
// have reached the master, none left in the intake (a wake-up lost: the
// node waits for a message that never comes, and its ops sit there until
// the next add, or forever), and each key's ops in the order they were
// sent (with one batch in flight, each sender's). Three in flight too: the
// node then sets the flag with batches out.
func TestIntakeWakeUnderConcurrency(t *testing.T) {
	for _, inFlight := range []int{1, 3} {
		t.Run(fmt.Sprintf("in flight %d", inFlight), func(t *testing.T) { testIntakeWake(t, inFlight) })
	}
}

func testIntakeWake(t *testing.T, inFlight int) {
	const rounds, senders, ops = 30, 8, 150
	for round := range rounds {
		synctest.Test(t, func(t *testing.T) {
			g := &gated{Transport: memory.New().Transport(), gate: make(chan struct{})}
			close(g.gate)
			m, err := NewMetrics(nil, []string{"m0"})
			if err != nil {
				t.Fatal(err)
			}
			c, err := Start(Config{Transports: []transport.Transport{g}, Names: []string{"m0"}, MasterTimeout: time.Second, MaxBatch: 16, MaxInFlight: inFlight, Coordinators: 1, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			in := m.nodes[0].in.Load()
			co := &coordinator{nodes: c.nodes, intakes: []*intake{in}}
			ctx := rootSender{root: c.system.Root}

			var wg sync.WaitGroup
			for s := range senders {
				wg.Go(func() {
					for k := range ops {
						r := &opRequest{op: transport.Op{Kind: transport.Release, Key: fmt.Sprintf("k%d-%d", s, k%4), Value: fmt.Sprintf("%d/%d", s, k), TTL: time.Second}}
						r.hash = keyHash(r.op.Key)
						co.toNode(ctx, 0, r)
					}
				})
			}
			wg.Wait()
			synctest.Wait() // every batch sent has returned; the worker waits for work

			if k := in.len(); k != 0 {
				t.Fatalf("round %d: %d ops left in the intake with the node idle: a wake-up was lost", round, k)
			}
			g.mu.Lock()
			seen := append([]transport.Op(nil), g.seen...)
			g.mu.Unlock()
			if len(seen) != senders*ops {
				t.Fatalf("round %d: the master got %d ops, want %d", round, len(seen), senders*ops)
			}
			// next[s][key]: the sender's next op of that key; with one
			// batch in flight, next[s][0] counts all of the sender's.
			keys := 4
			if inFlight == 1 {
				keys = 1
			}
			next := make([][]int, senders)
			for s := range next {
				next[s] = make([]int, keys)
				for j := range keys {
					next[s][j] = j
				}
			}
			for _, op := range seen {
				sv, kv, _ := strings.Cut(op.Value, "/")
				s, _ := strconv.Atoi(sv)
				k, _ := strconv.Atoi(kv)
				if want := next[s][k%keys]; k != want {
					t.Fatalf("round %d: sender %d's op %d reached the master when its op %d was next", round, s, k, want)
				}
				next[s][k%keys] += keys
			}
		})
	}
}
