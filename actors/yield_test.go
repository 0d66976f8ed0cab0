package actors

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
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
// its callers run while it waits. With one P and the collector off, nothing
// but the yield gives up the P between Do and the hand-back (the stand-in
// node runs inside the hand-back, on the synchronized dispatcher), so
// without it the goroutine Do made runnable never runs first. With it, it
// runs first unless the scheduler's fairness check (every 61st schedule
// takes the global queue, where Gosched put the worker, first) picks the
// worker back at once: so 16 batches, and at least 12 must see it.
func TestImmediateWorkerYieldsBeforeHandingBack(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const batches = 16
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
		ranFirst := 0
		for range batches {
			s.ran.Store(false)
			n.work <- &batch{reqs: []*opRequest{{}}, ops: []transport.Op{{}}, res: make([]transport.Result, 1), sent: time.Now()}
			if <-stand.saw {
				ranFirst++
			}
			s.wg.Wait()
		}
		close(n.work)
		wg.Wait()
		sys.Shutdown()
		switch {
		case immediate && ranFirst < 12:
			t.Errorf("immediate: the goroutine Do made runnable ran before the batch went back in %d of %d batches, want at least 12", ranFirst, batches)
		case !immediate && ranFirst > 0:
			t.Errorf("not immediate: the goroutine Do made runnable ran before the batch went back in %d of %d batches, want none (no yield)", ranFirst, batches)
		}
	}
}
