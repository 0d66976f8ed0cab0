package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/quorumlock/redlock/api"
)

// OBSERVABILITY.md: a call's span has one event per round of ops, in order.
// A fenced Lock's winning acquire round is followed by its fencing round:
// both are events (review observe, 2026-11-29).
func TestFencedLockSpanHasBothRounds(t *testing.T) {
	tm := newTelemetry(t)
	e := newMemory(t, 3, tm.opts...)
	l, err := e.Lock(context.Background(), "f", api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	s := tm.spans.GetSpans()[0]
	var names []string
	for _, ev := range s.Events {
		names = append(names, ev.Name)
	}
	if len(names) != 2 || names[0] != "acquire" || names[1] != "fence" {
		t.Errorf("fenced Lock span events %v, want [acquire fence]\n%s", names, spanSummary(s))
	}
}

// OBSERVABILITY.md: redlock.lock.acquire.attempts is not recorded for calls
// cancelled before they were sent; one that leaves the local line without a
// turn made no attempt, and a 0 would drag the histogram's mean down.
func TestLockCancelledInLineRecordsNoAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		e := newMemory(t, 3, tm.opts...)
		ctx := context.Background()
		l, err := e.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		// A first waiter contends (retries against the held key); a second one
		// waits in the local line behind it.
		c1, cancel1 := context.WithCancel(ctx)
		first := make(chan struct{})
		go func() { _, _ = e.Lock(c1, "a"); close(first) }()
		defer func() { cancel1(); <-first }()
		synctest.Wait() // its first attempt is out: it has the key's turn
		c2, cancel2 := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := e.Lock(c2, "a"); done <- err }()
		pollMetrics(t, func() bool { w, _ := sel(tm.collect(t), "redlock.lock.waiters"); return w == 1 })
		_, before := sel(tm.collect(t), "redlock.lock.acquire.attempts", "redlock.outcome=canceled")
		cancel2()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock: %v", err)
		}
		if _, after := sel(tm.collect(t), "redlock.lock.acquire.attempts", "redlock.outcome=canceled"); after != before {
			t.Errorf("a Lock cancelled in the local line (never sent) was recorded in redlock.lock.acquire.attempts (%d -> %d records)", before, after)
		}
	})
}
