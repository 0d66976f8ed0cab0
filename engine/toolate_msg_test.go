package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lagMaster applies every batch at once and answers lag later, within the
// master timeout: a round trip longer than a short TTL, with no overload.
type lagMaster struct {
	transport.Transport
	lag *atomic.Int64 // a time.Duration, switched by the test
}

func (m *lagMaster) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	err := m.Transport.Do(ctx, ops, res)
	time.Sleep(time.Duration(m.lag.Load()))
	return err
}

// A majority that granted after the validity was used up did answer: the
// error must not open with "too few masters answered in time", which sends
// the reader after down masters, but say that the masters granted too late
// and what to change (the TTL, or the client's load), while errors.Is still
// finds the sentinel. Extend's analogue is ErrNotHeld, whose headline is
// true; its detail must give the same advice. The masters answer 60ms
// after the send, the TTL is 50ms, the master timeout 100ms: every attempt
// is granted too late, and none of it is overload.
func TestGrantedTooLateSaysSo(t *testing.T) {
	const (
		lag = 60 * time.Millisecond
		ttl = 50 * time.Millisecond
	)
	bg := context.Background()
	for _, tc := range []struct {
		name     string
		sentinel error
		want     []string
		run      func(t *testing.T, e *engine.Engine, lag *atomic.Int64) error
	}{
		{"TryLock", api.ErrQuorumUnreachable, []string{"masters granted, but too late", "TTL", ttl.String()},
			func(t *testing.T, e *engine.Engine, _ *atomic.Int64) error {
				_, err := e.TryLock(bg, "k", api.WithTTL(ttl))
				return err
			}},
		{"Lock, attempts spent", api.ErrQuorumUnreachable, []string{"masters granted, but too late", "TTL", ttl.String(), "after 2 attempts"},
			func(t *testing.T, e *engine.Engine, _ *atomic.Int64) error {
				_, err := e.Lock(bg, "k", api.WithTTL(ttl), api.WithMaxAttempts(2))
				return err
			}},
		// The last attempt of a call whose context ended carries no detail:
		// the headline alone must tell.
		{"Lock, deadline", context.DeadlineExceeded, []string{"(last attempt: quorum unreachable: ", "masters granted, but too late", "TTL"},
			func(t *testing.T, e *engine.Engine, _ *atomic.Int64) error {
				ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
				defer cancel()
				_, err := e.Lock(ctx, "k", api.WithTTL(ttl))
				if !errors.Is(err, api.ErrQuorumUnreachable) {
					t.Errorf("%v: the last attempt's ErrQuorumUnreachable is not in the chain", err)
				}
				return err
			}},
		{"TrySemaphore", api.ErrQuorumUnreachable, []string{"masters granted, but too late", "TTL", ttl.String()},
			func(t *testing.T, e *engine.Engine, _ *atomic.Int64) error {
				_, err := e.TrySemaphore(bg, "s", 2, api.WithTTL(ttl))
				return err
			}},
		{"Extend", api.ErrNotHeld, []string{"extended, but too late", "TTL", ttl.String()},
			func(t *testing.T, e *engine.Engine, lag *atomic.Int64) error {
				lag.Store(0)
				l, err := e.TryLock(bg, "k", api.WithTTL(ttl))
				if err != nil {
					t.Fatalf("TryLock on prompt masters: %v", err)
				}
				lag.Store(int64(60 * time.Millisecond))
				return l.Extend(bg)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var d atomic.Int64
				d.Store(int64(lag))
				_, ts := memoryMasters(3)
				for i := range ts {
					ts[i] = &lagMaster{Transport: ts[i], lag: &d}
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(100*time.Millisecond), quiet)
				if err != nil {
					t.Fatal(err)
				}
				closeAtEnd(t, e)
				err = tc.run(t, e, &d)
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("got %v; want %v", err, tc.sentinel)
				}
				msg := err.Error()
				if strings.Contains(msg, "too few masters answered") {
					t.Errorf("%s\nsays too few masters answered, though a majority granted", msg)
				}
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%s\nlacks %q", msg, w)
					}
				}
			})
		})
	}
}
