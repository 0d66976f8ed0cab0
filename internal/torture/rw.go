package torture

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/history"
)

// The read-write workload (--workloads ...,rw): clients of a few read-write
// keys, apart from the mutex keys (a key with readers is checked by the
// writer-overlap rule instead of the mutex rules and token order, so the
// mutex keys keep theirs). On those keys a client is a reader (RLock or
// TryRLock), a writer (WLock or TryWLock), or now and then a plain Lock
// (TryLock), which the readers must exclude too since it is a writer for
// them. Each grant is recorded with Shared set for a reader; the checker
// requires that a writer overlaps no holder.
const (
	rwKeys     = 4
	rwReaders  = 0.6 // the share of calls that read
	rwWLocks   = 0.3 // ... that take the write lock; the rest are plain Locks
	rwKeyStart = "torture-rw:"
)

// rwState is what the read-write clients of a run share: how many readers
// are in a section on each key, so that the report can show readers did
// share keys (rw_reader_shared counts sections begun while another reader
// of the key was in one).
type rwState struct {
	readers [rwKeys]atomic.Int32
}

// rwClient loops acquire -> critical section -> Unlock like client, with
// the same plans (short, long, extended, overrun). Fencing does not apply to
// read-write locks, and the plain Locks here go without it too.
func (r *run) rwClient(ctx context.Context, eng api.Locker, e, c int) {
	rng := r.rngFor(uint64(1+e)<<32 | uint64(c) | 1<<30)
	log := r.rec.Log()
	holder := "e" + strconv.Itoa(e+1) + "/rw" + strconv.Itoa(c+1)
	for ctx.Err() == nil {
		ki := rng.IntN(rwKeys)
		key := rwKeyStart + strconv.Itoa(ki)
		p := r.plan(rng)
		opts := append([]api.LockOption{api.WithFencing(false)}, p.opts...)
		once := rng.IntN(2) == 0
		role := "writer"
		var take func(context.Context, string, ...api.LockOption) (api.Lock, error)
		switch x := rng.Float64(); {
		case x < rwReaders:
			role, take = "reader", eng.RLock
			if once {
				take = eng.TryRLock
			}
		case x < rwReaders+rwWLocks:
			take = eng.WLock
			if once {
				take = eng.TryWLock
			}
		default:
			role, take = "lock", eng.Lock
			if once {
				take = eng.TryLock
			}
		}
		var (
			l   api.Lock
			err error
		)
		if once {
			l, err = take(ctx, key, opts...)
		} else {
			lctx, cancel := context.WithTimeout(ctx, r.cfg.TTL/5)
			l, err = take(lctx, key, opts...)
			cancel()
		}
		if err != nil {
			if ctx.Err() == nil {
				r.count(r.lockErrs, "rw_"+role+"_"+classify(err), 1)
			}
			continue
		}
		g := history.Grant{Key: key, Holder: holder, GrantedAt: r.rec.Now(), ValidUntil: r.rec.At(l.Until()), Shared: role == "reader"}
		if p.kind == "long" {
			select {
			case r.holds <- holdEvent{key: key, at: time.Now()}:
			default:
			}
		}
		if g.Shared {
			if r.rw.readers[ki].Add(1) > 1 {
				r.count(r.held, "rw_reader_shared", 1)
			}
			r.section(l, p, &g)
			r.rw.readers[ki].Add(-1)
		} else {
			r.section(l, p, &g)
		}
		g.ValidUntil = r.rec.At(l.Until())
		g.Released, g.ReleasedAt = true, r.rec.Now()
		r.unlocks.Go(func() {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.Unlock(uctx); err != nil && ctx.Err() == nil {
				r.count(r.unlockErrs, "rw_"+role+"_"+classify(err), 1)
			}
		})
		log.Add(g)
		r.count(r.held, "rw_"+role+"_"+p.kind, 1)
	}
}
