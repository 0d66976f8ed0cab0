package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lostGiveUp is a master whose batches holding a writer's give-up (a
// ReleaseShared of key) go unapplied while armed: timed out (held until
// the batch's deadline, as on a slow master or a CPU-starved client whose
// write came too late) or reported not sent (transport.ErrNotSent).
// Everything else is served.
type lostGiveUp struct {
	transport.Transport
	key     string
	notSent bool
	armed   atomic.Bool
}

func (m *lostGiveUp) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if m.armed.Load() {
		for _, op := range ops {
			if op.Kind == transport.ReleaseShared && op.Key == m.key {
				if m.notSent {
					return transport.Fail(res, fmt.Errorf("master: %w: %w", transport.ErrNotSent, context.DeadlineExceeded))
				}
				<-ctx.Done()
				return transport.Fail(res, ctx.Err())
			}
		}
	}
	return m.Transport.Do(ctx, ops, res)
}

func (m *lostGiveUp) Capabilities() transport.Capabilities {
	return transport.CapabilitiesOf(m.Transport)
}

// No key left on a master after a failed attempt, for a write lock that
// gives up while a reader holds the key: each attempt leaves a
// writer-waiting marker on every master, and the give-up drops them. On
// master 2 the give-up is lost once (timed out unapplied, or not sent);
// the master is quick again right after. Once the reader unlocks, no
// master may keep the key for the marker's TTL (1h).
func TestWriterGiveUpLostLeavesNoMarker(t *testing.T) {
	for _, notSent := range []bool{false, true} {
		name := "timed out"
		if notSent {
			name = "not sent"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const timeout = 100 * time.Millisecond
				ms, tsA := memoryMasters(3)
				tsB := make([]transport.Transport, len(ms))
				for i, m := range ms {
					tsB[i] = m.Transport()
				}
				lost := &lostGiveUp{Transport: tsA[2], key: "rw", notSent: notSent}
				lost.armed.Store(true)
				tsA[2] = lost
				a, err := engine.NewWithTransports(tsA, api.WithoutRestartQuarantine(), api.WithMasterTimeout(timeout))
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				b, err := engine.NewWithTransports(tsB, api.WithoutRestartQuarantine(), api.WithMasterTimeout(timeout))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				ctx := context.Background()
				r, err := b.RLock(ctx, "rw", api.WithTTL(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				_, err = a.WLock(wctx, "rw", api.WithTTL(time.Hour))
				cancel()
				if err == nil || errors.Is(err, api.ErrInvalidArgument) {
					t.Fatalf("WLock while a reader held the key: %v; want it to fail by its deadline (the test's premise is broken)", err)
				}
				synctest.Wait()
				time.Sleep(2 * timeout) // the give-up's batch ends unapplied
				synctest.Wait()
				lost.armed.Store(false)
				if err := r.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				// Many background cleanups (cleanupMaxWait is 1s), far
				// below the TTL, by which the marker would go on its own.
				const bound = 10 * time.Second
				start := time.Now()
				for ms[2].Len() != 0 {
					if time.Since(start) > bound {
						t.Fatalf("master 2 still holds the key %v after the reader's Unlock: the failed write lock's writer-waiting marker stayed there (TTL 1h) because its give-up was %s once", bound, name)
					}
					time.Sleep(timeout)
					synctest.Wait()
				}
				for i, m := range ms {
					if n := m.Len(); n != 0 {
						t.Errorf("master %d holds %d keys after the reader's Unlock", i, n)
					}
				}
			})
		})
	}
}
