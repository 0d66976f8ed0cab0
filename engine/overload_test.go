package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// busyMaster is a healthy master that takes *service to answer every batch
// (a test may change it between calls).
type busyMaster struct {
	transport.Transport
	service *atomic.Int64 // a time.Duration
}

func busy(t transport.Transport, service *atomic.Int64) *busyMaster {
	return &busyMaster{Transport: t, service: service}
}

func (s *busyMaster) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	select {
	case <-time.After(time.Duration(s.service.Load())):
	case <-ctx.Done():
		return transport.Fail(res, ctx.Err())
	}
	return s.Transport.Do(ctx, ops, res)
}

// Admission control: under overload, healthy masters are never reported as
// unreachable. Every master answers each batch in 30ms, a third of the
// master timeout, but with one op a batch and one batch in flight, 16
// TryLocks at once wait up to 15 × 30ms = 450ms in each node's queue. The
// wait must show as latency: every TryLock of a fresh key gets its lock,
// and none fails with ErrQuorumUnreachable. (Under synctest the clock is
// exact, so a loaded machine cannot change the queue's arithmetic.)
func TestOverloadIsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			lockers = 16
			service = 30 * time.Millisecond
			timeout = 100 * time.Millisecond
		)
		_, ts := memoryMasters(5)
		var d atomic.Int64
		d.Store(int64(service))
		for i := range ts {
			ts[i] = busy(ts[i], &d)
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(),
			api.WithMasterTimeout(timeout), api.WithBatching(1, 1), api.WithCoordinators(1))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			failed  []error
			maxWait time.Duration
		)
		for i := range lockers {
			wg.Go(func() {
				t0 := time.Now()
				l, err := e.TryLock(ctx, fmt.Sprintf("busy-%d", i))
				took := time.Since(t0)
				if err == nil && !l.Until().After(time.Now()) {
					err = fmt.Errorf("lock %d granted already expired (until %v)", i, l.Until())
				}
				mu.Lock()
				maxWait = max(maxWait, took)
				if err != nil {
					failed = append(failed, err)
				}
				mu.Unlock()
				if l != nil {
					_ = l.Unlock(ctx)
				}
			})
		}
		wg.Wait()
		unreachable := 0
		for _, err := range failed {
			if errors.Is(err, api.ErrQuorumUnreachable) {
				unreachable++
			}
		}
		if len(failed) > 0 {
			t.Fatalf("%d of %d TryLocks of fresh keys on healthy masters failed (%d as ErrQuorumUnreachable), the longest took %v; the first: %v",
				len(failed), lockers, unreachable, maxWait, failed[0])
		}
		if maxWait <= timeout {
			t.Fatalf("the longest TryLock took %v: the queue never waited longer than the master timeout %v, so this tests nothing", maxWait, timeout)
		}
	})
}
