package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
)

// An auto-extension that one master refuses (it lacks the key:
// it never got it, or forgot it) while others are briefly unreachable is
// "too few answers", not "a majority no longer holds it". The engine
// retries an unreachable auto-extension while the lock is valid
// (retryExtension), but the coordinator calls refused+failed > n-quorum
// ErrNotHeld as soon as failed <= n-quorum, even when refused is a
// minority: the lock is given up at the first blip, with a false reason.
//
// Five masters; the lock is on four (master 5 is wiped after the grant,
// as a restart or an expired-early key would). When the first
// auto-extension is due, masters 1 and 2 are cut off for 100ms (fail fast,
// nothing applied): 2 failed + 1 refused. Masters 1-4 still hold the key,
// a majority; the extension should be retried, as it is when three masters
// are cut off. (Review timeedges, 2026-11-29.)
func TestExtendMinorityRefusalIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  []int
		wipe bool
	}{
		{"three-cut", []int{0, 1, 2}, false},       // control: 3 failed: retried
		{"two-cut-one-refuses", []int{0, 1}, true}, // 2 failed + 1 refused
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = time.Second
				ms, inner := memoryMasters(5)
				fs := make([]*faulty.Transport, 5)
				ts := make([]transport.Transport, 5)
				for i := range inner {
					fs[i] = faulty.Wrap(inner[i], faulty.Config{})
					ts[i] = fs[i].View()
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithTTL(ttl),
					api.WithMasterTimeout(50*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				ctx := context.Background()
				l, err := e.TryLock(ctx, "k", api.WithAutoExtend(0.5))
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if tc.wipe {
					ms[4].Restart() // master 5 forgets the key; 1-4 still hold it
				}
				first := l.Until()
				heldAtLoss := make(chan int, 1)
				var lostAt time.Time
				go func() {
					<-l.Done()
					lostAt = time.Now()
					n := 0
					for _, m := range ms {
						if v, ok := m.Get("k"); ok && v == l.Value() {
							n++
						}
					}
					heldAtLoss <- n
				}()
				// The first auto-extension is due at about half the validity.
				time.Sleep(ttl/2 - 50*time.Millisecond)
				for _, i := range tc.cut {
					fs[i].Partition(100 * time.Millisecond)
				}
				time.Sleep(time.Until(first) + ttl/10)
				select {
				case <-l.Done():
					n := <-heldAtLoss
					t.Fatalf("lock lost %v before its Until, at the first blip, while %d of 5 masters held it: %v",
						first.Sub(lostAt), n, l.Err())
				default:
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
