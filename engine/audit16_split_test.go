package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// slowLink applies every batch after a fixed delay: one engine's link to
// one master.
type slowLink struct {
	transport.Transport
	delay time.Duration
}

func (s *slowLink) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return transport.Fail(res, ctx.Err())
	}
	return s.Transport.Do(ctx, ops, res)
}

func (s *slowLink) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(s.Transport)
}

// A split vote grants nobody twice: two engines ask for one key at the
// same instant, engine A reaches masters 1-2 first and engine B masters
// 3-5, so A is granted by two masters and B by three. Only B may hold it
// (a majority of five is three). The mutual-exclusion tests of one engine
// cannot show this: its goroutines wait in the engine's local line and
// contend one at a time, so two of them never split the masters' votes;
// this is the quorum rule itself, for each kind of exclusive hold.
func TestSplitVoteGrantsOne(t *testing.T) {
	type take func(context.Context, *engine.Engine) (api.Lock, error)
	for _, tc := range []struct {
		name string
		take take
	}{
		{"mutex", func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TryLock(ctx, "k") }},
		{"fenced mutex", func(ctx context.Context, e *engine.Engine) (api.Lock, error) {
			return e.TryLock(ctx, "k", api.WithFencing(true))
		}},
		{"writer", func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TryWLock(ctx, "k") }},
		{"one permit", func(ctx context.Context, e *engine.Engine) (api.Lock, error) { return e.TrySemaphore(ctx, "k", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const (
					fast = time.Millisecond
					slow = 5 * time.Millisecond
				)
				ms, _ := memoryMasters(5)
				newEngine := func(fastTo func(int) bool) *engine.Engine {
					ts := make([]transport.Transport, len(ms))
					for i, m := range ms {
						d := slow
						if fastTo(i) {
							d = fast
						}
						ts[i] = &slowLink{Transport: m.Transport(), delay: d}
					}
					e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(time.Second),
						api.WithMasterTimeout(100*time.Millisecond))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = e.Close() })
					return e
				}
				a := newEngine(func(i int) bool { return i < 2 })
				b := newEngine(func(i int) bool { return i >= 2 })
				type result struct {
					l   api.Lock
					err error
				}
				ra, rb := make(chan result, 1), make(chan result, 1)
				ctx := context.Background()
				go func() { l, err := tc.take(ctx, a); ra <- result{l, err} }()
				go func() { l, err := tc.take(ctx, b); rb <- result{l, err} }()
				ga, gb := <-ra, <-rb
				if ga.err == nil && gb.err == nil {
					t.Fatalf("both engines hold %q at once: A (granted by masters 1-2) until %v, B (masters 3-5) until %v",
						ga.l.Key(), ga.l.Until(), gb.l.Until())
				}
				if gb.err != nil {
					t.Fatalf("B, granted by three masters of five, was refused: %v", gb.err)
				}
				if !errors.Is(ga.err, api.ErrNotAcquired) {
					t.Errorf("A, refused by three masters of five: %v, want ErrNotAcquired", ga.err)
				}
				if err := gb.l.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
				}
				synctest.Wait()
				for i, m := range ms {
					if n := m.Len(); n != 0 {
						t.Errorf("master %d keeps %d keys after A's failed attempt and B's Unlock", i+1, n)
					}
				}
			})
		})
	}
}
