package torture

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/history"
)

// Workloads: what the clients do. Clients are dealt to the workloads in
// turn (client c of each engine runs Workloads[c%len]).
const (
	// WorkloadMutex: Lock/TryLock of the shared keys (client.go).
	WorkloadMutex = "mutex"
	// WorkloadSemaphore: Semaphore/TrySemaphore of a few semaphores of 1
	// to semMaxPermits permits; every permit is recorded with its
	// semaphore, so the checker applies "never more than P holders" on top
	// of the per-slot rules (each slot is an ordinary lock key).
	WorkloadSemaphore = "semaphore"
)

// AllWorkloads lists every workload, in report order.
var AllWorkloads = []string{WorkloadMutex, WorkloadSemaphore}

// semaphores is how many semaphores the semaphore clients share; semaphore
// i has 1 + i%semMaxPermits permits, so a one-permit semaphore (a mutex
// built from slots) is among them.
const (
	semaphores    = 4
	semMaxPermits = 3
)

func (c *Config) validateWorkloads() error {
	// None given is the mutex alone, the workload before there was a
	// choice.
	seen := map[string]bool{}
	for _, w := range c.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			return fmt.Errorf("--workloads: unknown workload %q; want a comma-separated list of %v", w, AllWorkloads)
		}
		if seen[w] {
			return fmt.Errorf("--workloads: %q listed twice", w)
		}
		seen[w] = true
	}
	return nil
}

// workload is what client c runs.
func (r *run) workload(c int) string {
	if len(r.cfg.Workloads) == 0 {
		return WorkloadMutex
	}
	return r.cfg.Workloads[c%len(r.cfg.Workloads)]
}

// runClient runs client c of engine e with its workload.
func (r *run) runClient(ctx context.Context, eng api.Locker, e, c int) {
	if r.workload(c) == WorkloadSemaphore {
		r.semClient(ctx, eng, e, c)
		return
	}
	r.client(ctx, eng, e, c)
}

// semClient loops Semaphore -> critical section -> Unlock until ctx ends,
// with the mutex clients' plans (short, long, extended, overrun) and their
// share of fenced calls. It records each permit under its slot key, with
// the semaphore's name and permits.
func (r *run) semClient(ctx context.Context, eng api.Locker, e, c int) {
	rng := r.rngFor(uint64(1+e)<<32 | uint64(c) | 1<<31)
	log := r.rec.Log()
	holder := "e" + strconv.Itoa(e+1) + "/s" + strconv.Itoa(c+1)
	for ctx.Err() == nil {
		i := rng.IntN(semaphores)
		name, permits := "torture-sem:"+strconv.Itoa(i), 1+i%semMaxPermits
		p := r.plan(rng)
		fenced := !r.cfg.NoFencing && rng.Float64() >= r.cfg.Unfenced
		opts := append([]api.LockOption{api.WithFencing(fenced)}, p.opts...)
		var (
			l   api.Lock
			err error
		)
		if rng.IntN(2) == 0 {
			l, err = eng.TrySemaphore(ctx, name, permits, opts...)
		} else {
			lctx, cancel := context.WithTimeout(ctx, r.cfg.TTL/5)
			l, err = eng.Semaphore(lctx, name, permits, opts...)
			cancel()
		}
		if err != nil {
			if ctx.Err() == nil {
				r.count(r.lockErrs, "semaphore_"+classify(err), 1)
			}
			continue
		}
		g := history.Grant{Key: l.Key(), Holder: holder, Token: l.Token(), GrantedAt: r.rec.Now(), ValidUntil: r.rec.At(l.Until()),
			Semaphore: name, Permits: permits}
		r.rec.NoteToken(g.Key, g.Token)
		r.section(l, p, &g)
		g.ValidUntil = r.rec.At(l.Until())
		g.Released, g.ReleasedAt = true, r.rec.Now()
		r.unlocks.Go(func() {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.Unlock(uctx); err != nil && ctx.Err() == nil {
				r.count(r.unlockErrs, "semaphore_"+classify(err), 1)
			}
		})
		log.Add(g)
		r.count(r.held, "semaphore_"+p.kind, 1)
	}
}
