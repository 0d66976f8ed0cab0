package faulty_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
	"github.com/quorumlock/redlock/transport/memory"
)

// The engine over five in-memory masters, each engine's link to each
// master wrapped with faults, three engines contending for two keys, the
// history checked at the end. In-memory masters report their uptime exactly,
// so with the restart quarantine on, master restarts (one at a time) must
// not break exclusion; without it, restarting a majority right after a
// grant must, which shows the checker catching it without Redis.
//
// Each case runs in a synctest bubble: its clock moves only when every
// goroutine waits, so a loaded machine cannot starve a holder past its
// validity or make Done's timer lose a race with the hold timer, and the 3s
// of faults take well under a second.
func TestEngineUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		name       string
		quarantine bool
	}{{"quarantine", true}, {"no-quarantine", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				vs, grants, faults := runMemoryTorture(t, tc.quarantine, 3*time.Second)
				t.Logf("%d grants, faults %v, %d violations", grants, faults, len(vs))
				if grants == 0 {
					t.Fatal("no grants")
				}
				if tc.quarantine {
					for i, v := range vs {
						if i < 5 {
							t.Errorf("violation: %v", v)
						}
					}
					return
				}
				overlaps := 0
				for _, v := range vs {
					if v.Kind == history.Overlap || v.Kind == history.GrantOverlap {
						overlaps++
					}
				}
				if overlaps == 0 {
					t.Fatalf("no overlap found without the quarantine (violations: %v)", vs)
				}
			})
		})
	}
}

func runMemoryTorture(t *testing.T, quarantine bool, d time.Duration) ([]history.Violation, int64, map[string]int) {
	const (
		nMasters = 5
		nEngines = 3
		nClients = 4
		ttl      = 200 * time.Millisecond
	)
	keys := []string{"k1", "k2"}
	masters := make([]*memory.Master, nMasters)
	for i := range masters {
		masters[i] = memory.NewNamed(fmt.Sprintf("m%d", i+1))
	}
	links := make([][]*faulty.Transport, nEngines)
	engines := make([]*engine.Engine, nEngines)
	for e := range engines {
		ts := make([]transport.Transport, nMasters)
		for m := range ts {
			links[e] = append(links[e], faulty.Wrap(masters[m].Transport(), faulty.Config{Seed: uint64(e*nMasters + m)}))
			ts[m] = links[e][m]
		}
		q := api.WithRestartQuarantine(ttl)
		if !quarantine {
			q = api.WithoutRestartQuarantine()
		}
		eng, err := engine.NewWithTransports(ts, api.WithTTL(ttl), api.WithMasterTimeout(20*time.Millisecond), q)
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		engines[e] = eng
	}
	// Fresh masters sit out one quarantine period (fake time).
	time.Sleep(ttl + time.Millisecond)

	rec := history.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	holds := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for e, eng := range engines {
		for c := range nClients {
			log := rec.Log()
			rng := rand.New(rand.NewPCG(uint64(e), uint64(c)))
			holder := fmt.Sprintf("e%d/c%d", e+1, c+1)
			wg.Go(func() {
				for ctx.Err() == nil {
					key := keys[rng.IntN(len(keys))]
					lctx, lcancel := context.WithTimeout(ctx, ttl)
					l, err := eng.Lock(lctx, key, api.WithFencing(true))
					lcancel()
					if err != nil {
						continue
					}
					g := history.Grant{Key: key, Holder: holder, Token: l.Token(), GrantedAt: rec.Now(), ValidUntil: rec.At(l.Until())}
					hold := time.Duration(rng.IntN(500)) * time.Microsecond
					if rng.IntN(20) == 0 {
						hold = ttl * 3 / 4
						select {
						case holds <- struct{}{}:
						default:
						}
					}
					// As internal/torture's client: a careful holder acts only
					// while Done is open and the deadline has not passed.
					done := l.Done()
					select {
					case <-done:
					default:
						if !time.Now().Before(l.Until()) {
							break
						}
						g.Ran, g.Start = true, rec.Now()
						timer := time.NewTimer(hold)
						select {
						case <-done:
						case <-timer.C:
						}
						timer.Stop()
						g.End = rec.Now()
						select {
						case <-done:
							g.Signaled = true
						default:
						}
					}
					g.ValidUntil = rec.At(l.Until())
					g.Released, g.ReleasedAt = true, rec.Now()
					uctx, ucancel := context.WithTimeout(context.Background(), time.Second)
					_ = l.Unlock(uctx)
					ucancel()
					log.Add(g)
				}
			})
		}
	}

	faults := map[string]int{}
	rng := rand.New(rand.NewPCG(42, 0))
	var lastRestart time.Time
	var heal sync.WaitGroup
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(20+rng.IntN(60)) * time.Millisecond):
		}
		if ctx.Err() != nil {
			break
		}
		if !quarantine {
			// Split brain: a majority restarts, empty, right after a grant.
			select {
			case <-holds:
			case <-ctx.Done():
				continue
			}
			for _, m := range rng.Perm(nMasters)[:3] {
				masters[m].Restart()
			}
			faults["restart-majority"]++
			time.Sleep(ttl) // fake time: one ttl before the next
			continue
		}
		e, m := rng.IntN(nEngines), rng.IntN(nMasters)
		l := links[e][m]
		switch rng.IntN(5) {
		case 0:
			l.Partition(time.Duration(10+rng.IntN(100)) * time.Millisecond)
			faults["partition"]++
		case 1:
			l.DropReplies(time.Duration(10+rng.IntN(50)) * time.Millisecond)
			faults["drop"]++
		case 2:
			l.SetLatency(time.Duration(rng.IntN(25))*time.Millisecond, 5*time.Millisecond)
			heal.Go(func() { time.Sleep(200 * time.Millisecond); l.SetLatency(0, 0) }) // fake time
			faults["latency"]++
		case 3:
			l.Pause()
			d := time.Duration(10+rng.IntN(100)) * time.Millisecond
			heal.Go(func() { time.Sleep(d); l.Resume() }) // fake time
			faults["pause"]++
		case 4:
			// One master at a time, far apart, so that a majority always
			// keeps its fencing counters (the precondition of the token
			// claim): the next grant of each (hot) key raises the restarted
			// master's counter again.
			if time.Since(lastRestart) > 400*time.Millisecond {
				masters[m].Restart()
				lastRestart = time.Now()
				faults["restart"]++
			}
		}
	}
	heal.Wait()
	wg.Wait()
	return history.Check(rec.History()), rec.Grants(), faults
}
