package bench_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
)

// scripted is a Client whose cycles answer from a script: the error of
// attempt i is answer(i); it records the keys it was given.
type scripted struct {
	answer func(i int) error
	keys   []string
}

func (c *scripted) Cycle(_ context.Context, key string, wait bool) error {
	if wait {
		return errors.New("WaitReady must make single attempts (TryLock)")
	}
	c.keys = append(c.keys, key)
	return c.answer(len(c.keys) - 1)
}

var errDown = errors.New("masters down")

// TestWaitReadyRetries: failed attempts are retried, each on a fresh key
// under the prefix, until one succeeds.
func TestWaitReadyRetries(t *testing.T) {
	c := &scripted{answer: func(i int) error {
		if i < 3 {
			return errDown
		}
		return nil
	}}
	if err := bench.WaitReady(context.Background(), c, "p:", time.Hour, nil); err != nil {
		t.Fatalf("WaitReady: %v, want nil after the fourth attempt", err)
	}
	if len(c.keys) != 4 {
		t.Fatalf("%d attempts (%q), want 4", len(c.keys), c.keys)
	}
	seen := map[string]bool{}
	for _, k := range c.keys {
		if !strings.HasPrefix(k, "p:") || seen[k] {
			t.Errorf("key %q: want a fresh key under the prefix p: (keys %q)", k, c.keys)
		}
		seen[k] = true
	}
}

// TestWaitReadyGivesUp: past the timeout it returns the last attempt's own
// error, not the deadline's.
func TestWaitReadyGivesUp(t *testing.T) {
	c := &scripted{answer: func(i int) error { return errors.New("attempt " + strconv.Itoa(i)) }}
	err := bench.WaitReady(context.Background(), c, "p:", time.Millisecond, nil)
	if err == nil || err.Error() != "attempt "+strconv.Itoa(len(c.keys)-1) {
		t.Fatalf("WaitReady: %v, want the last attempt's error (attempt %d)", err, len(c.keys)-1)
	}
}

// TestWaitReadyExtend: extend sees every failed attempt and can make the
// wait longer than the timeout, but never shorter.
func TestWaitReadyExtend(t *testing.T) {
	c := &scripted{answer: func(i int) error {
		if i < 5 {
			return errDown
		}
		return nil
	}}
	var seen []time.Duration
	extend := func(err error, waited time.Duration) time.Duration {
		if !errors.Is(err, errDown) {
			t.Errorf("extend got %v, want the attempt's error", err)
		}
		if len(seen) > 0 && waited < seen[len(seen)-1] {
			t.Errorf("waited %v after %v: want it to grow", waited, seen[len(seen)-1])
		}
		seen = append(seen, waited)
		return time.Hour
	}
	// Without extend a nanosecond allows a single attempt.
	if err := bench.WaitReady(context.Background(), c, "p:", time.Nanosecond, extend); err != nil {
		t.Fatalf("WaitReady: %v, want nil after extend allowed an hour", err)
	}
	if len(seen) != 5 {
		t.Errorf("extend saw %d failed attempts, want 5", len(seen))
	}

	// extend returning less than the timeout keeps the timeout.
	c = &scripted{answer: func(i int) error {
		if i < 2 {
			return errDown
		}
		return nil
	}}
	shorter := func(error, time.Duration) time.Duration { return 0 }
	if err := bench.WaitReady(context.Background(), c, "p:", time.Hour, shorter); err != nil {
		t.Fatalf("WaitReady: %v, want nil: an extend of 0 must not shorten the hour", err)
	}
}

// TestWaitReadyCanceled: when ctx ends it stops at once with the attempt's
// error.
func TestWaitReadyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &scripted{answer: func(i int) error {
		if i == 1 {
			cancel()
		}
		return errDown
	}}
	if err := bench.WaitReady(ctx, c, "p:", time.Hour, nil); !errors.Is(err, errDown) {
		t.Fatalf("WaitReady: %v, want %v", err, errDown)
	}
	if len(c.keys) != 2 {
		t.Errorf("%d attempts, want 2: none after ctx ended", len(c.keys))
	}
}
