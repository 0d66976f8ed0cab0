package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// TestClusterResharding moves the slot of contended, fenced lock keys from
// shard to shard, a key at a time, in all three clusters at once, while two
// engines take and release those locks; the history checker must find no
// violation, and the transports must have followed both MOVED and ASK.
func TestClusterResharding(t *testing.T) {
	resharding(t, api.WithoutRestartQuarantine())
}

// TestClusterReshardingQuarantined is TestClusterResharding with the
// restart quarantine on (per shard): every hand-off of the moving slot
// (ASK, MOVED, a new slot map) makes the engine read the source shard's run
// id again before a grant counts, and locks must go on being granted.
func TestClusterReshardingQuarantined(t *testing.T) {
	resharding(t, api.WithRestartQuarantine(10*time.Second))
}

func resharding(t *testing.T, quarantine api.Option) {
	cs := clusters(t, 3, 2)
	keys := []string{"{mig}:0", "{mig}:1", "{mig}:2"}
	slot := rediscluster.Slot(keys[0])

	var ts []*rediscluster.Transport
	newEngine := func() *engine.Engine {
		tr := make([]transport.Transport, len(cs))
		for i, c := range cs {
			cfg, err := rediscluster.ParseAddr(clusterAddr(c))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ct, err := rediscluster.Dial(ctx, cfg)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, ct)
			tr[i] = ct
		}
		e, err := engine.NewWithTransports(tr, quarantine, api.WithMasterTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	engines := []*engine.Engine{newEngine(), newEngine()}

	rec := history.NewRecorder()
	stop := make(chan struct{})
	var lockErrs atomic.Int64
	var wg sync.WaitGroup
	for ei, e := range engines {
		for g := range 4 {
			wg.Go(func() {
				log := rec.Log()
				holder := fmt.Sprintf("e%d-g%d", ei, g)
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					key := keys[(g+n)%len(keys)]
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					// A fenced acquire is a script over the key and its
					// counter, which Redis refuses (TRYAGAIN) while their
					// slot is half moved and either is missing: only the
					// last key is fenced, so the others keep granting
					// (over ASK) while all three clusters reshard.
					l, err := e.Lock(ctx, key, api.WithTTL(2*time.Second), api.WithFencing(key == keys[2]))
					cancel()
					if err != nil {
						lockErrs.Add(1)
						continue
					}
					gr := history.Grant{Key: key, Holder: holder, Token: l.Token(), GrantedAt: rec.Now(), ValidUntil: rec.At(l.Until()), Ran: true}
					gr.Start = rec.Now()
					time.Sleep(time.Millisecond) // the critical section
					gr.End = rec.Now()
					gr.Released, gr.ReleasedAt = true, rec.Now()
					_ = l.Unlock(context.Background())
					log.Add(gr)
				}
			})
		}
	}

	// progress waits until the workload has added a grant since the last
	// call: each key moved lands between grants.
	var seen atomic.Int64
	progress := func() error {
		deadline := time.Now().Add(30 * time.Second)
		for rec.Grants() <= seen.Load() {
			if time.Now().After(deadline) {
				return errors.New("no grant for 30s while the slot moved")
			}
			time.Sleep(time.Millisecond) // poll: grants report no event
		}
		seen.Store(rec.Grants())
		return nil
	}
	const moves = 4
	errs := make(chan error, len(cs))
	var mig sync.WaitGroup
	for ci, c := range cs {
		mig.Go(func() {
			ctx := context.Background()
			ps := procs(c)
			for m := range moves {
				src, err := redisproc.SlotOwner(ctx, ps, slot)
				if err != nil {
					errs <- err
					return
				}
				dst := 1 - src
				if err := redisproc.MigrateSlot(ctx, ps, ps[src], ps[dst], slot, 1, progress); err != nil {
					errs <- fmt.Errorf("cluster %d move %d: %w", ci, m, err)
					return
				}
				if now, err := redisproc.SlotOwner(ctx, ps, slot); err != nil || now != dst {
					errs <- fmt.Errorf("cluster %d move %d: slot owned by %d (%v), want %d", ci, m, now, err, dst)
					return
				}
				if err := progress(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	mig.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h := rec.History()
	if v := history.Check(h); len(v) > 0 {
		t.Fatalf("%d violations, first: %v", len(v), v[0])
	}
	var moved, ask int64
	for _, ct := range ts {
		m, a := ct.Redirects()
		moved, ask = moved+m, ask+a
	}
	t.Logf("%d grants, %d failed Lock calls, %d ops resent after MOVED, %d after ASK", len(h.Grants), lockErrs.Load(), moved, ask)
	if len(h.Grants) < 3*moves || moved == 0 || ask == 0 {
		t.Fatalf("%d grants, %d MOVED, %d ASK followed: the resharding did not exercise the redirects", len(h.Grants), moved, ask)
	}
}

var _ = redistest.Start
