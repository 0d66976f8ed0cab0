package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// Readers share a key; a writer, a mutex and readers exclude each other as
// the read-write lock says; every hold's Unlock leaves no key behind.
func TestReadWriteExclusion(t *testing.T) {
	ms, ts := memoryMasters(3)
	e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	r1, err := e.TryRLock(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.TryRLock(ctx, "doc")
	if err != nil {
		t.Fatalf("a second reader: %v, want it to share the key", err)
	}
	if r1.Value() == r2.Value() {
		t.Fatal("two readers share one value")
	}
	for name, try := range map[string]func() (api.Lock, error){
		"TryWLock": func() (api.Lock, error) { return e.TryWLock(ctx, "doc") },
		"TryLock":  func() (api.Lock, error) { return e.TryLock(ctx, "doc") },
	} {
		if l, err := try(); !errors.Is(err, api.ErrNotAcquired) {
			t.Fatalf("%s while readers hold the key: lock %v, err %v, want ErrNotAcquired", name, l, err)
		}
	}
	for _, m := range ms {
		if n := m.Readers("doc"); n != 2 {
			t.Fatalf("%d readers on a master, want 2", n)
		}
	}
	if err := r1.Extend(ctx); err != nil {
		t.Fatalf("reader Extend: %v", err)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Unlock(ctx); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("second Unlock of a reader: %v, want ErrNotHeld", err)
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The refused writer gave up: its markers went with it, so nothing is
	// left and a reader is admitted at once.
	for _, m := range ms {
		if n := m.Len(); n != 0 {
			t.Fatalf("%d keys left on a master after every hold ended, want 0", n)
		}
	}
	w, err := e.TryWLock(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryRLock(ctx, "doc"); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryRLock under a writer: %v, want ErrNotAcquired", err)
	}
	if _, err := e.TryWLock(ctx, "doc"); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryWLock under a writer: %v, want ErrNotAcquired", err)
	}
	if err := w.Extend(ctx); err != nil {
		t.Fatalf("writer Extend: %v", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := e.TryLock(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryRLock(ctx, "doc"); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TryRLock under a mutex: %v, want ErrNotAcquired", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if n := m.Len(); n != 0 {
			t.Fatalf("%d keys left on a master, want 0", n)
		}
	}
}

// A reader's validity runs out like a mutex's, auto-extension keeps it, and
// Done closes on Unlock.
func TestReaderLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMemory(t, 3)
		ctx := context.Background()
		r, err := e.RLock(ctx, "k", api.WithTTL(time.Second), api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // ten auto-extensions' worth
		if err := r.Err(); err != nil {
			t.Fatalf("auto-extended reader: %v", err)
		}
		if _, err := e.TryWLock(ctx, "k"); !errors.Is(err, api.ErrNotAcquired) {
			t.Fatalf("TryWLock over an auto-extended reader: %v, want ErrNotAcquired", err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		<-r.Done()
		short, err := e.RLock(ctx, "k", api.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		<-short.Done()
		if !errors.Is(short.Err(), api.ErrExpired) {
			t.Fatalf("reader past its validity: %v, want ErrExpired", short.Err())
		}
		time.Sleep(100 * time.Millisecond) // past the masters' expiry too
		w, err := e.TryWLock(ctx, "k")
		if err != nil {
			t.Fatalf("TryWLock after the only reader expired: %v", err)
		}
		_ = w.Unlock(ctx)
	})
}

func TestReadWriteRefusals(t *testing.T) {
	e := newMemory(t, 3)
	ctx := context.Background()
	for name, try := range map[string]func() error{
		"RLock(WithFencing(true))": func() error { _, err := e.RLock(ctx, "k", api.WithFencing(true)); return err },
		"WLock(WithFencing(true))": func() error { _, err := e.TryWLock(ctx, "k", api.WithFencing(true)); return err },
		"RLock of a bad key":       func() error { _, err := e.RLock(ctx, transport.FencePrefix+"k"); return err },
	} {
		if err := try(); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	// Fencing as the engine's default: refused until the call turns it off.
	fenced := newMemory(t, 3, api.WithFencing(true))
	if _, err := fenced.TryRLock(ctx, "k"); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("TryRLock on an engine with fencing on: %v, want ErrInvalidArgument", err)
	}
	if r, err := fenced.TryRLock(ctx, "k", api.WithFencing(false)); err != nil {
		t.Errorf("TryRLock(WithFencing(false)) on an engine with fencing on: %v", err)
	} else {
		_ = r.Unlock(ctx)
	}
	// Masters without the read-write ops: refused up front, naming them.
	ts, mins := mixed()
	e2, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	for name, try := range map[string]func() error{
		"RLock":    func() error { _, err := e2.RLock(ctx, "k"); return err },
		"TryRLock": func() error { _, err := e2.TryRLock(ctx, "k"); return err },
		"WLock":    func() error { _, err := e2.WLock(ctx, "k"); return err },
		"TryWLock": func() error { _, err := e2.TryWLock(ctx, "k"); return err },
	} {
		wantRefusal(t, name, try(), "Shared")
	}
	for _, m := range mins {
		if n := m.unsupported.Load(); n != 0 {
			t.Errorf("a minimal master got %d read-write ops, want none", n)
		}
	}
}

// readerStream runs overlapping readers of key on engines of their own
// (so no local queue orders them) until stop: each holds for hold, and a
// new one starts every hold/4, so at every moment some reader holds key
// and, without writer preference, a writer never finds it free.
func readerStream(t *testing.T, ts func() []transport.Transport, key string, hold time.Duration, stop <-chan struct{}, held *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for g := range 4 {
		e, err := engine.NewWithTransports(ts(), api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer e.Close()
			time.Sleep(time.Duration(g) * hold / 4)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*hold)
				r, err := e.RLock(ctx, key)
				cancel()
				if err != nil {
					continue // held back by the writer: ask again
				}
				held.Add(1)
				time.Sleep(hold)
				_ = r.Unlock(context.Background())
			}
		})
	}
	return &wg
}

// TestWriterNotStarved: under a continuous stream of overlapping readers a
// writer still gets in, within the readers' hold plus its own backoff; the
// same stream keeps a plain Lock out (the control that shows the stream
// never leaves the key free, so the bound is the writer preference's doing).
func TestWriterNotStarved(t *testing.T) {
	const hold = 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		writer func(e *engine.Engine, ctx context.Context) (api.Lock, error)
		wantIn bool
	}{
		{"WLock", func(e *engine.Engine, ctx context.Context) (api.Lock, error) { return e.WLock(ctx, "catalog") }, true},
		{"Lock (control)", func(e *engine.Engine, ctx context.Context) (api.Lock, error) { return e.Lock(ctx, "catalog") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms := []*memory.Master{memory.New(), memory.New(), memory.New()}
				ts := func() []transport.Transport {
					out := make([]transport.Transport, len(ms))
					for i, m := range ms {
						out[i] = m.Transport()
					}
					return out
				}
				stop := make(chan struct{})
				var held atomic.Int64
				wg := readerStream(t, ts, "catalog", hold, stop, &held)
				time.Sleep(2 * hold) // the stream is flowing
				w, err := engine.NewWithTransports(ts(), api.WithoutRestartQuarantine())
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				// The bound: the readers in place leave within hold, and the
				// writer's next attempt comes within its largest backoff
				// (250ms, randomized up to 1.5 times) after that.
				const bound = hold + 375*time.Millisecond + 100*time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), 5*bound)
				start := time.Now()
				l, err := tc.writer(w, ctx)
				took := time.Since(start)
				cancel()
				before := held.Load()
				switch {
				case tc.wantIn && err != nil:
					t.Errorf("writer under a reader stream: %v after %v, want it in within %v", err, took, bound)
				case tc.wantIn && took > bound:
					t.Errorf("writer got in after %v, want within %v", took, bound)
				case !tc.wantIn && err == nil:
					t.Errorf("a plain Lock got in after %v: the reader stream left the key free, so it does not test starvation", took)
				}
				if l != nil {
					time.Sleep(hold) // readers stay out while the writer holds
					if n := held.Load(); n != before {
						t.Errorf("%d readers got in while the writer held the key", n-before)
					}
					_ = l.Unlock(context.Background())
				}
				close(stop)
				wg.Wait()
				if held.Load() < 4 {
					t.Errorf("only %d reads in the stream", held.Load())
				}
				t.Logf("writer: %v after %v; %d reads", err, took, held.Load())
			})
		})
	}
}

func TestReadWriteErrorsNameTheOp(t *testing.T) {
	e := newMemory(t, 3)
	ctx := context.Background()
	w, err := e.WLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	_, err = e.TryRLock(ctx, "k")
	if err == nil || !strings.Contains(err.Error(), "tryrlock") {
		t.Fatalf("TryRLock error %v does not name the op", err)
	}
}
