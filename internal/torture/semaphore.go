package torture

import (
	"context"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/history"
)

// semaphores is how many semaphores the semaphore clients share; semaphore
// i has 1 + i%semMaxPermits permits, so a one-permit semaphore (a mutex
// built from slots) is among them.
const (
	semaphores    = 4
	semMaxPermits = 3
)

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
