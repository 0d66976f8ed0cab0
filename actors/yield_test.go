package actors

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
)

// spawner is an immediate transport whose Do makes one goroutine runnable,
// as a caller woken by an earlier batch would be, and never waits.
type spawner struct {
	immediate bool
	ran       atomic.Bool // the goroutine has run
	wg        sync.WaitGroup
}

func (s *spawner) Immediate() bool { return s.immediate }
func (s *spawner) Close() error    { return nil }

func (s *spawner) Do(_ context.Context, _ []transport.Op, res []transport.Result) error {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.ran.Store(true)
	}()
	for i := range res {
		res[i] = transport.Result{OK: true}
	}
	return nil
}

// backSeen stands in for a node actor: it reports, for each batch handed
// back to it, whether the spawner's goroutine had run by then.
type backSeen struct {
	s   *spawner
	saw chan bool
}

func (r *backSeen) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*batch); ok {
		r.saw <- r.s.ran.Load()
	}
}

// An immediate master's I/O goroutine lets the goroutines already runnable
// run before it hands a returned batch back to its node (worker), so that
// the ops they add join the next batch instead of each waking a worker for
// a batch of its own. A master that waits on the network needs no yield:
// its callers run while it waits. With one P the order is exact: the
// goroutine Do made runnable runs before the batch goes back only if the
// worker yields, since nothing else would give up the P in between (the
// stand-in node runs inside the hand-back, on the synchronized dispatcher).
func TestImmediateWorkerYieldsBeforeHandingBack(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, immediate := range []bool{true, false} {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
		s := &spawner{immediate: immediate}
		stand := &backSeen{s: s, saw: make(chan bool, 1)}
		self := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return stand },
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)),
			actor.WithMailbox(newMailbox)))
		var wg sync.WaitGroup
		n := &node{t: s, timeout: time.Second, root: sys.Root, self: self, wg: &wg,
			immediate: transport.IsImmediate(s), work: make(chan *batch, 1)}
		wg.Add(1)
		go n.worker()
		b := &batch{reqs: []*opRequest{{}}, ops: []transport.Op{{}}, res: make([]transport.Result, 1), sent: time.Now()}
		n.work <- b
		ranFirst := <-stand.saw
		close(n.work)
		wg.Wait()
		s.wg.Wait()
		sys.Shutdown()
		if ranFirst != immediate {
			t.Errorf("immediate=%v: the goroutine Do made runnable ran before the batch went back: %v, want %v",
				immediate, ranFirst, immediate)
		}
	}
}
