package actors

import (
	"fmt"
	"log/slog"
	"slices"
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

// crasher panics on its first hot message of shard 1 and records the rest,
// with the lifecycle messages protoactor's path brings it.
type crasher struct {
	got     []any
	crashed bool
	started chan struct{}
}

func (c *crasher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *opRequest:
		if m.shard == 1 && !c.crashed {
			c.crashed = true
			panic("boom")
		}
		c.got = append(c.got, int(m.shard))
	case *actor.Restarting:
		c.got = append(c.got, "restarting")
	case *actor.Started:
		c.got = append(c.got, "started")
		c.started <- struct{}{}
	}
}

// A panic in a Receive that the bypass ran is escalated as protoactor's
// own path escalates it (mailbox.run's recover, EscalateFailure): the
// supervisor restarts the actor, which sees Restarting and Started again,
// loses the message that panicked (as protoactor would), and gets the hot
// messages sent after it in order, through the bypass again.
func TestBypassPanicEscalatesAndRestarts(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	c := &crasher{started: make(chan struct{}, 2)}
	b := &bypass{a: c}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return b },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
		actor.WithMailbox(func() actor.Mailbox { return withBypass(b, newMailbox()) })))
	<-c.started
	for i := range 4 {
		sys.Root.Send(pid, &opRequest{shard: int32(i)})
	}
	select {
	case <-c.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the actor was not restarted after its bypassed Receive panicked")
	}
	for i := 4; i < 6; i++ {
		sys.Root.Send(pid, &opRequest{shard: int32(i)})
	}
	_ = sys.Root.PoisonFuture(pid).Wait()
	want := []any{"started", 0, "restarting", "started", 2, 3, 4, 5}
	if !slices.Equal(c.got, want) {
		t.Fatalf("the actor saw %v, want %v", c.got, want)
	}
	if b.stopped != true || b.ctx.Context == nil {
		t.Fatalf("after the restart and stop: stopped %v, context %v", b.stopped, b.ctx.Context)
	}
}
