package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
)

// handleMixSeeds is how many random schedules TestHandleMix plays; the
// review ran 2,300 of them (HSEED) under -race.
const handleMixSeeds = 8

// Extend, Unlock and auto-extensions of a few locks at once, with contexts
// that end at once, soon or never, while masters pause and resume at
// random (an extension out holds the handle up to the master timeout), and
// in a quarter of the schedules Close at a random time. In a synctest
// bubble: every call returns (a caller blocked on something not durable
// stops the bubble's clock, which inRealTime turns into a crash), none is
// ErrInternal, an Extend of a lock that had ended before it is never its
// ctx's error ("the lock is as it was"), an Unlock called before Until is
// never ErrExpired, and once every lock is unlocked and the masters
// answer, no master keeps a key.
func TestHandleMix(t *testing.T) {
	for s := range handleMixSeeds {
		inRealTime(t, stuckMsg, func(t *testing.T) { handleMix(t, uint64(s)) })
	}
}

func handleMix(t *testing.T, s uint64) {
	rng := rand.New(rand.NewPCG(s, 7))
	e, fs, ms := slowMasters(t, api.WithTTL(time.Second), api.WithMasterTimeout(time.Duration(50+rng.IntN(300))*time.Millisecond))
	defer e.Close()
	closeAt := time.Duration(-1)
	if rng.IntN(4) == 0 {
		closeAt = time.Duration(rng.IntN(3000)) * time.Millisecond
	}
	stop := make(chan struct{})
	var wg, mg sync.WaitGroup
	mg.Go(func() { // masters pause and resume at random
		r := rand.New(rand.NewPCG(s, 8))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(r.IntN(400)) * time.Millisecond):
			}
			if f := fs[r.IntN(len(fs))]; f.Paused() {
				f.Resume()
			} else {
				f.Pause()
			}
		}
	})
	if closeAt >= 0 {
		wg.Go(func() { time.Sleep(closeAt); _ = e.Close() })
	}
	for i := range 4 {
		l, err := e.Lock(context.Background(), "mix"+strconv.Itoa(i), api.WithAutoExtend([]float64{0.5, 0.9, 0.3}[rng.IntN(3)]))
		if err != nil {
			continue
		}
		for c := range 3 {
			r := rand.New(rand.NewPCG(s, uint64(100+i*10+c)))
			wg.Go(func() {
				for range 15 {
					time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					switch r.IntN(3) {
					case 0:
						ctx, cancel = context.WithCancel(ctx)
						cancel()
					case 1:
						ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(200))*time.Millisecond)
					}
					called, until, before := time.Now(), l.Until(), l.Err()
					unlock := r.IntN(8) == 0
					var err error
					if unlock {
						err = l.Unlock(ctx)
					} else {
						err = l.Extend(ctx)
					}
					cancel()
					switch {
					case err == nil:
					case errors.Is(err, api.ErrInternal):
						t.Errorf("seed %d: %v", s, err)
					case unlock && errors.Is(err, api.ErrExpired) && called.Before(until):
						t.Errorf("seed %d: Unlock called %v before Until: %v", s, until.Sub(called), err)
					case !unlock && before != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
						t.Errorf("seed %d: Extend of a lock that had ended (%v): %v", s, before, err)
					}
				}
			})
		}
		wg.Go(func() {
			time.Sleep(5 * time.Second)
			_ = l.Unlock(context.Background())
		})
	}
	wg.Wait()
	close(stop)
	mg.Wait()
	for _, f := range fs {
		f.Resume()
	}
	if closeAt >= 0 {
		return // keys held at Close stay until their TTL (Locker.Close)
	}
	time.Sleep(300 * time.Millisecond) // the background resends
	synctest.Wait()
	for i, m := range ms {
		if n := m.Len(); n != 0 {
			t.Errorf("seed %d: master %d holds %d keys after every lock was unlocked", s, i+1, n)
		}
	}
}
