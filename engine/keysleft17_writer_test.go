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

// No key left on a master after a failed attempt, for a write lock cut by
// Close: a writer waiting on a reader leaves a writer-waiting marker on each
// master at every attempt, and drops them when it gives up (giveUp). Engine
// a's writer is waiting when a closes; engine b's reader then unlocks. No
// master may keep the key for the marker's TTL (1h).
func TestWriterCutByCloseLeavesNoMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, tsA := memoryMasters(3)
		tsB := make([]transport.Transport, len(ms))
		for i, m := range ms {
			tsB[i] = m.Transport()
		}
		a, err := engine.NewWithTransports(tsA, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := engine.NewWithTransports(tsB, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ctx := context.Background()
		r, err := b.RLock(ctx, "rw", api.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan error, 1)
		go func() {
			l, err := a.WLock(ctx, "rw", api.WithTTL(time.Hour))
			if err == nil {
				_ = l.Unlock(ctx)
			}
			wrote <- err
		}()
		time.Sleep(100 * time.Millisecond) // a few attempts, each refused by the reader
		synctest.Wait()
		select {
		case err := <-wrote:
			t.Fatalf("WLock returned %v while a reader held the key: the test's premise is broken", err)
		default:
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-wrote; !errors.Is(err, api.ErrClosed) {
			t.Fatalf("WLock cut by Close: %v; want ErrClosed", err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i, m := range ms {
			if n := m.Len(); n != 0 {
				t.Errorf("master %d holds %d keys after the reader's Unlock: the writer cut by Close left its writer-waiting marker (TTL 1h)", i, n)
			}
		}
	})
}
