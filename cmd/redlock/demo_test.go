package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"go.uber.org/goleak"
)

// TestDemoInProcess runs the demo as a function: it must leave no goroutine
// behind (buyers, actors, timers, transports).
func TestDemoInProcess(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := defaultDemoOptions()
	o.Buyers, o.Products, o.Stock, o.JSON = 32, 3, 40, true
	var out bytes.Buffer
	if err := demo(context.Background(), &out, o); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	checkReport(t, decodeOne(t, out.String()), o.Products, o.Stock)
}

func TestDemoInProcessText(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := defaultDemoOptions()
	o.Buyers, o.Products, o.Stock, o.Pick, o.Masters = 16, 2, 30, "random", 3
	var out bytes.Buffer
	if err := demo(context.Background(), &out, o); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	want := "with the lock: 0 oversold across 60 sales (3 masters, quorum 2)\n"
	if got := out.String(); !bytes.HasSuffix(out.Bytes(), []byte(want)) {
		t.Errorf("report does not end with %q:\n%s", want, got)
	}
}

// TestDemoCancel cancels a demo that cannot finish in time, as Ctrl-C does:
// it ends promptly, says "interrupted" and leaves nothing running.
func TestDemoCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := defaultDemoOptions()
	o.Buyers, o.Products, o.Stock = 64, 1, maxItems
	for _, after := range []time.Duration{0, 20 * time.Millisecond, 300 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		start := time.Now()
		var out bytes.Buffer
		err := demo(ctx, &out, o)
		cancel()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitInterrupted || ee.err.Error() != "interrupted" {
			t.Errorf("cancelled after %v: %v, want exit %d \"interrupted\"", after, err, exitInterrupted)
		}
		if took := time.Since(start); took > after+5*time.Second {
			t.Errorf("cancelled after %v: took %v to stop", after, took)
		}
		if out.Len() != 0 {
			t.Errorf("cancelled after %v: wrote a report:\n%s", after, out.String())
		}
	}
}

// TestDemoTimeout: a demo that outlives --timeout fails with exit 1.
func TestDemoTimeout(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := defaultDemoOptions()
	o.Buyers, o.Products, o.Stock, o.Timeout = 64, 1, maxItems, 200*time.Millisecond
	err := demo(context.Background(), &bytes.Buffer{}, o)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("demo: %v, want exit %d", err, exitFailure)
	}
	if want := "did not finish within --timeout 200ms"; !bytes.Contains([]byte(ee.err.Error()), []byte(want)) {
		t.Errorf("error %q does not say %q", ee.err, want)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("percentile([7], 0.99) = %v, want 7", got)
	}
}

func TestNum(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45437: "-45,437"} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q, want %q", n, got, want)
		}
	}
}

// brokenEngine grants every lock at once without asking the masters, like
// an engine whose exclusion is broken.
type brokenEngine struct{ lockEngine }

type brokenLock struct{ api.Lock }

func (brokenEngine) Lock(context.Context, string, ...api.LockOption) (api.Lock, error) {
	return brokenLock{}, nil
}

func (brokenLock) Until() time.Time             { return time.Now().Add(time.Hour) }
func (brokenLock) Unlock(context.Context) error { return nil }

// TestDemoBrokenLock: when the "locked" run oversells, the report says so
// loudly and the demo fails with exit 1.
func TestDemoBrokenLock(t *testing.T) {
	defer goleak.VerifyNone(t)
	real := openEngine
	defer func() { openEngine = real }()
	openEngine = func(o demoOptions) (lockEngine, error) {
		e, err := real(o)
		if err != nil {
			return nil, err
		}
		return brokenEngine{e}, nil
	}
	o := defaultDemoOptions()
	o.Buyers, o.Products, o.Stock = 64, 2, 50
	var out bytes.Buffer
	err := demo(context.Background(), &out, o)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailure || !strings.HasPrefix(ee.err.Error(), "BUG: ") {
		t.Fatalf("demo: %v, want exit %d with a BUG message", err, exitFailure)
	}
	if !strings.Contains(out.String(), "OVERSOLD") || !strings.Contains(out.String(), "THIS IS A BUG") {
		t.Errorf("report does not shout about the oversold locked run:\n%s", out.String())
	}
}
