package actors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
)

// reuser is a coordinator stand-in that, like a coordinator whose requests
// got their last answer, reuses every request of a reply message the moment
// it has the message: it rewrites the request as a new one for shard 1.
type reuser struct {
	got   [][]*opRequest
	reuse bool
}

func (r *reuser) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*nodeReplies)
	if !ok {
		return
	}
	var reqs []*opRequest
	for _, it := range m.items {
		reqs = append(reqs, it.req)
		if r.reuse {
			*it.req = opRequest{shard: 1, reply: true}
		}
	}
	r.got = append(r.got, reqs)
	putReplies(m)
}

// A node passes a batch's results on to each coordinator shard in a
// message of its own, and reads none of the batch's requests once one
// message has gone: the coordinator that gets it may reuse its requests at
// once (reqpool.go). Here shard 0's coordinator rewrites its requests as
// it receives them (the synchronized dispatcher runs it inside the Send),
// so a node that went back over the requests for shard 1 would route shard
// 0's rewritten requests there too.
func TestDeliverReadsNoRequestAfterASend(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	spawn := func(r *reuser) *actor.PID {
		return sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r },
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
			actor.WithMailbox(newMailbox)))
	}
	c0, c1 := &reuser{reuse: true}, &reuser{}
	n := &node{root: sys.Root, coords: []*actor.PID{spawn(c0), spawn(c1)}, outbox: make([]*nodeReplies, 2)}
	a, b, c := &opRequest{shard: 0, reply: true}, &opRequest{shard: 1, reply: true}, &opRequest{shard: 0, reply: true}
	quiet := &opRequest{shard: 1} // wants no reply
	n.deliver([]*opRequest{a, b, quiet, c}, make([]transport.Result, 4), time.Now())
	if len(c0.got) != 1 || len(c0.got[0]) != 2 || c0.got[0][0] != a || c0.got[0][1] != c {
		t.Errorf("shard 0 got %v, want one message with its two requests", c0.got)
	}
	if len(c1.got) != 1 || len(c1.got[0]) != 1 || c1.got[0][0] != b {
		t.Errorf("shard 1 got %d messages %v, want one with only its own request: the node read shard 0's requests after sending them", len(c1.got), c1.got)
	}
	for i, m := range n.outbox {
		if m != nil {
			t.Errorf("the outbox keeps a message for shard %d after delivering", i)
		}
	}
}
