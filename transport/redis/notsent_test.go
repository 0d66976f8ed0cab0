package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// A batch that reaches the transport after its deadline (lateCtx: see
// pipe_test.go) is not sent, and
// says so with transport.ErrNotSent: no master saw it, and the lateness is
// the client's. Before, the same batch failed as "not sent: context deadline
// exceeded" (timer fired) or "not sent before its deadline" (timer late),
// which the engine could not tell from a master that did not answer: under
// overload three such batches of one TryLock read as ErrQuorumUnreachable.
func TestLateBatchNotSent(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("warm", "v", time.Minute)}, true)

	fired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"timer fired", fired},
		{"timer not yet fired", lateCtx{context.Background()}},
	} {
		res := make([]transport.Result, 1)
		err := tr.Do(tc.ctx, []transport.Op{acq("late", "v", time.Minute)}, res)
		if !errors.Is(err, transport.ErrNotSent) || !errors.Is(res[0].Err, transport.ErrNotSent) {
			t.Errorf("%s: Do = %v, op: %v; want transport.ErrNotSent", tc.name, err, res[0].Err)
		}
	}
	// Nothing went out: the key is free.
	mustDo(t, tr, []transport.Op{acq("late", "w", time.Minute)}, true)
}
