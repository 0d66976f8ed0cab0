package actors

import (
	"context"
	"testing"

	"github.com/quorumlock/redlock/api"
)

// The outcome a call's error gets in metrics and spans. A call that a
// coordinator's panic ended (coord19) fails with ErrInternal; it was
// counted as "unreachable", which tells the operator the masters are down
// when the engine hit a bug of its own and the masters may be fine. It is
// "internal" now, whatever the panic value wraps.
func TestOutcomeNames(t *testing.T) {
	panicked := func(v any) error {
		return &api.Error{Op: "lock", Key: "k", Err: &api.PanicError{Actor: "coordinator 0", Value: v}}
	}
	for _, c := range []struct {
		name            string
		err             error
		acquire, extend string
	}{
		{"nil", nil, "acquired", "ok"},
		{"not acquired", &api.Error{Op: "lock", Err: api.ErrNotAcquired}, "taken", "not_held"},
		{"not held", &api.Error{Op: "extend", Err: api.ErrNotHeld}, "taken", "not_held"},
		{"quorum unreachable", &api.Error{Op: "lock", Err: api.ErrQuorumUnreachable}, "unreachable", "unreachable"},
		{"canceled", &api.Error{Op: "lock", Err: context.Canceled}, "canceled", "canceled"},
		{"deadline", &api.Error{Op: "lock", Err: context.DeadlineExceeded}, "canceled", "canceled"},
		{"invalid", &api.Error{Op: "lock", Err: api.ErrInvalidArgument}, "invalid", "invalid"},
		{"closed", &api.Error{Op: "lock", Err: api.ErrClosed}, "closed", "closed"},
		{"panic", panicked("boom"), "internal", "internal"},
		{"panic with an error that is a sentinel", panicked(api.ErrQuorumUnreachable), "internal", "internal"},
	} {
		o := Outcome(c.err)
		if got := AcquireOutcome(o); got != c.acquire {
			t.Errorf("%s: acquire outcome %q, want %q (err %v)", c.name, got, c.acquire, c.err)
		}
		if got := ExtendOutcome(o); got != c.extend {
			t.Errorf("%s: extend outcome %q, want %q (err %v)", c.name, got, c.extend, c.err)
		}
	}
}
