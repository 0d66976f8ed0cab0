package actors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// bypassRecorder is an actor that records what a bypassed Receive sees.
type bypassRecorder struct {
	got  []any
	self []*actor.PID
	out  chan struct{}
}

func (r *bypassRecorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *opRequest:
		r.got = append(r.got, int(m.shard))
		r.self = append(r.self, ctx.Self())
	case string:
		r.got = append(r.got, m)
		r.self = append(r.self, ctx.Self())
	case *actor.Stopped:
		close(r.out)
	}
}

// TestBypassDelivers: user messages reach the actor in order, each as the
// context's Message, with the actor's own context behind it (Self), and a
// PoisonPill still stops the actor the protoactor way; a message sent
// after the stop does not reach the actor.
func TestBypassDelivers(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	r := &bypassRecorder{out: make(chan struct{})}
	b := &bypass{a: r}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return b },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
		actor.WithMailbox(func() actor.Mailbox { return withBypass(b, newMailbox()) })))
	// Hot messages and another kind (protoactor's path) interleaved.
	var want []any
	for i := range 5 {
		sys.Root.Send(pid, &opRequest{shard: int32(i)})
		sys.Root.Send(pid, "other")
		want = append(want, i, "other")
	}
	// The synchronized dispatcher ran each message as it was sent.
	if len(r.got) != len(want) {
		t.Fatalf("got %v, want %v", r.got, want)
	}
	for i := range want {
		if r.got[i] != want[i] || !r.self[i].Equal(pid) {
			t.Fatalf("message %d: got %v from self %v, want %v from %v", i, r.got[i], r.self[i], want[i], pid)
		}
	}
	if b.handle("other") {
		t.Fatal("the bypass took a message that is not on the hot path")
	}
	if b.ctx.msg != nil {
		t.Fatalf("the bypass context keeps %v after its message", b.ctx.msg)
	}
	sys.Root.Send(pid, &actor.PoisonPill{})
	select {
	case <-r.out:
	case <-time.After(10 * time.Second):
		t.Fatal("PoisonPill did not stop the actor")
	}
	// Straight into the mailbox, as a message that was queued as the actor
	// stopped would be: dropped, as protoactor drops it.
	if !b.handle(&opRequest{shard: 9}) || len(r.got) != len(want) {
		t.Fatalf("a message after the stop was handed on: %v", r.got)
	}
}

// TestBypassDeclinesBeforeStart: before Started the bypass has no context
// to give, so protoactor's path handles the message.
func TestBypassDeclinesBeforeStart(t *testing.T) {
	b := &bypass{a: &bypassRecorder{}}
	if b.handle(&opRequest{shard: 1}) {
		t.Fatal("handled a message before the actor started")
	}
}

// forwarder sends each Call it gets on as an op to every target.
type forwarder struct{ to []*actor.PID }

func (f *forwarder) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*Call); ok {
		for i, pid := range f.to {
			ctx.Send(pid, &opRequest{shard: int32(i)})
		}
	}
}

// TestBypassSendToPeers: a bypassed actor's sends reach a peer (posted
// into its mailbox) and an actor that is not one (protoactor's Send)
// alike.
func TestBypassSendToPeers(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	spawn := func(r *bypassRecorder) (*actor.PID, actor.Mailbox) {
		b := &bypass{a: r}
		var mb actor.Mailbox
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return b },
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
			actor.WithMailbox(func() actor.Mailbox { mb = withBypass(b, newMailbox()); return mb })))
		return pid, mb
	}
	peerR, otherR := &bypassRecorder{}, &bypassRecorder{}
	peerPID, peerMB := spawn(peerR)
	otherPID, _ := spawn(otherR)
	f := &forwarder{to: []*actor.PID{peerPID, otherPID}}
	fb := &bypass{a: f, ctx: bypassCtx{peers: []peer{{pid: peerPID, mb: peerMB}}}}
	fpid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return fb },
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
		actor.WithMailbox(func() actor.Mailbox { return withBypass(fb, newMailbox()) })))
	sys.Root.Send(fpid, &Call{})
	if len(peerR.got) != 1 || peerR.got[0] != 0 || !peerR.self[0].Equal(peerPID) {
		t.Errorf("the peer got %v, want [0]", peerR.got)
	}
	if len(otherR.got) != 1 || otherR.got[0] != 1 || !otherR.self[0].Equal(otherPID) {
		t.Errorf("the other actor got %v, want [1]", otherR.got)
	}
}
