package redis

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// A batch whose deadline passes before its write starts (a CPU-starved
// client) is not sent, and the connection stays: nothing of the batch is on
// the wire, so the stream is still in step. Over TLS that is not so: a
// tls.Conn whose write met its deadline is broken for good (crypto/tls: "all
// future writes will return the same error"), and a record may be on the
// wire in part. Kept, the connection failed every later batch at once as
// not sent, and was never replaced: the master was lost to this client for
// as long as it ran. After such a batch, the next Do (with a deadline of a
// second, retried while the transport reconnects) must get its answer, over
// plain TCP and over TLS.
func TestWriteNotStartedKeepsTheMasterUsable(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[useTLS], func(t *testing.T) {
			var cfg Config
			if useTLS {
				servers, tc := redistest.StartTLS(t, 1)
				cfg = Config{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(servers[0].TLSPort)), TLS: true, TLSConfig: tc}
			} else {
				cfg = Config{Addr: redistest.Start(t, 1)[0].Addr}
			}
			var hold atomic.Int64 // the write deadline to wait past, in Unix ns; 0: none
			testWriteHook = func() {
				if ns := hold.Load(); ns != 0 {
					time.Sleep(time.Until(time.Unix(0, ns)) + time.Millisecond)
				}
			}
			defer func() { testWriteHook = nil }()
			tr := dial(t, cfg)

			dl := time.Now().Add(50 * time.Millisecond)
			hold.Store(dl.UnixNano())
			ctx, cancel := context.WithDeadline(context.Background(), dl.Add(time.Minute)) // the write's deadline, not the context's timer
			res := make([]transport.Result, 1)
			_ = tr.Do(cutCtx{ctx, dl}, []transport.Op{acq("late", "v", time.Minute)}, res)
			cancel()
			hold.Store(0)
			if !errors.Is(res[0].Err, errNotSent) {
				t.Fatalf("a batch whose deadline passed before its write: %v; want errNotSent (the test sets nothing up)", res[0].Err)
			}

			start := time.Now()
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := tr.Do(ctx, []transport.Op{acq("next", "v", time.Minute)}, res)
				cancel()
				if err == nil && res[0].Err == nil {
					if !res[0].OK {
						t.Fatalf("the next batch's SET of a fresh key was refused: %+v", res[0])
					}
					return
				}
				if time.Since(start) > 5*time.Second {
					t.Fatalf("5s after a batch whose deadline passed before its write, a Do still fails: %v (batch error %v); the connection is not usable, and not replaced", res[0].Err, err)
				}
				time.Sleep(50 * time.Millisecond) // reconnecting: Do fails at once meanwhile
			}
		})
	}
}

// cutCtx gives a write the deadline d, earlier than its Context ends.
type cutCtx struct {
	context.Context
	d time.Time
}

func (c cutCtx) Deadline() (time.Time, bool) { return c.d, true }
