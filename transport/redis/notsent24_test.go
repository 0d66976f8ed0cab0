package redis

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// A batch that is never written must say so (transport.ErrNotSent): the
// engine then counts it as this client's overload, retries it as nothing
// applied, and does not count the master's silence toward "down"
// (admission control, issue 13). Two ways a batch goes unwritten: it
// waits for the connection's write lock, held by a batch before it, until
// its deadline passes; or its deadline passes before its own write starts
// (a starved client), and the write takes nothing. Both were reported as
// "no answer: context deadline exceeded", an outcome unknown, once the
// caller's context had ended: the master might have applied it. The key
// must not be on the master either way.
func TestUnsentBatchIsErrNotSent(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	cfg := Config{Addr: srv.Addr}

	t.Run("waited for the write lock", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		var armed atomic.Bool // set after Dial, whose own commands pass
		testWriteHook = func() {
			if armed.CompareAndSwap(true, false) {
				close(entered) // the first batch holds the write lock here
				<-release
			}
		}
		defer func() { testWriteHook = nil }()
		tr := dial(t, cfg)
		armed.Store(true)

		held := make(chan []transport.Result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := make([]transport.Result, 1)
			_ = tr.Do(ctx, []transport.Op{acq("ns24-first", "v", time.Minute)}, res)
			held <- res
		}()
		select {
		case <-entered:
		case r := <-held:
			t.Fatalf("the first batch finished (%+v) without reaching the write hook: the test sets nothing up", r[0])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		res := make([]transport.Result, 1)
		_ = tr.Do(ctx, []transport.Op{acq("ns24-waited", "v", time.Minute)}, res)
		cancel()
		close(release)
		if r := <-held; r[0].Err != nil || !r[0].OK {
			t.Fatalf("the batch that held the write lock: %+v; want its SET applied (the test sets nothing up)", r[0])
		}
		if _, ok := srv.Get(t, "ns24-waited"); ok {
			t.Fatal("the batch that waited for the write lock past its deadline is on the master: it was sent")
		}
		if !errors.Is(res[0].Err, transport.ErrNotSent) {
			t.Fatalf("a batch that waited for the write lock past its deadline and was never written: %v; want transport.ErrNotSent", res[0].Err)
		}
	})

	t.Run("deadline passed before the write", func(t *testing.T) {
		// The write waits, as a starved client would, until its context
		// has ended: its deadline has passed by then.
		var late atomic.Pointer[context.Context] // nil: no wait
		testWriteHook = func() {
			if ctx := late.Load(); ctx != nil {
				<-(*ctx).Done()
			}
		}
		defer func() { testWriteHook = nil }()
		tr := dial(t, cfg)

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		late.Store(&ctx)
		res := make([]transport.Result, 1)
		_ = tr.Do(ctx, []transport.Op{acq("ns24-late", "v", time.Minute)}, res)
		cancel()
		late.Store(nil)
		if _, ok := srv.Get(t, "ns24-late"); ok {
			t.Fatal("the batch whose deadline passed before its write is on the master: it was sent")
		}
		if !errors.Is(res[0].Err, transport.ErrNotSent) {
			t.Fatalf("a batch whose deadline passed before its write, with nothing written: %v; want transport.ErrNotSent", res[0].Err)
		}
	})
}
