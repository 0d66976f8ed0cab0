package torture

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/history"
)

// How clients use their locks: most sections are short; some hold the lock
// for much of its validity (the moments a targeted kill aims at); some keep
// it past its TTL with auto-extension; some try to run past their validity
// and must be stopped by the lost-lock signal.
var (
	shareLong     = 0.004
	shareExtended = 0.001
	shareOverrun  = 0.001
)

type plan struct {
	kind string
	hold time.Duration
	opts []api.LockOption
}

func (r *run) plan(rng *rand.Rand) plan {
	ttl := float64(r.cfg.TTL)
	shareLong := shareLong
	if r.cfg.LongShare > 0 {
		shareLong = r.cfg.LongShare
	}
	switch x := rng.Float64(); {
	case r.quiet.Load():
		// The quiet tail (keysleft.go): short sections only, so that the
		// clients stop within a Lock call of its end and the key check
		// reads the masters before the tail's last keys could expire.
	case x < shareLong:
		return plan{kind: "long", hold: time.Duration((0.3 + 0.5*rng.Float64()) * ttl)}
	case x < shareLong+shareExtended:
		return plan{kind: "extended", hold: time.Duration((1.2 + 1.3*rng.Float64()) * ttl),
			opts: []api.LockOption{api.WithAutoExtend(0.5)}}
	case x < shareLong+shareExtended+shareOverrun:
		return plan{kind: "overrun", hold: time.Duration(1.5 * ttl)}
	}
	var d time.Duration
	if r.cfg.Work > 0 {
		d = time.Duration(rng.Int64N(int64(r.cfg.Work) + 1))
	}
	return plan{kind: "short", hold: d}
}

// client loops Lock -> critical section -> Unlock until ctx ends; a share
// Config.Unfenced of the calls go without fencing (plain SET NX PX rather
// than the fenced script: a path of its own on the masters).
func (r *run) client(ctx context.Context, eng api.Locker, e, c int) {
	rng := r.rngFor(uint64(1+e)<<32 | uint64(c))
	log := r.rec.Log()
	holder := "e" + strconv.Itoa(e+1) + "/c" + strconv.Itoa(c+1)
	for ctx.Err() == nil {
		key := r.keys[rng.IntN(len(r.keys))]
		p := r.plan(rng)
		// Some calls go without fencing (--unfenced): the plain-SET path,
		// which fenced calls (a script) never take. --no-fencing: none fenced.
		fenced := !r.cfg.NoFencing && rng.Float64() >= r.cfg.Unfenced
		opts := append([]api.LockOption{api.WithFencing(fenced)}, p.opts...)
		var (
			l   api.Lock
			err error
		)
		// Half the calls make one attempt (TryLock), half wait up to a
		// fifth of the TTL (Lock): clients contend for the same keys
		// without piling up behind a key that is held for long.
		if rng.IntN(2) == 0 {
			l, err = eng.TryLock(ctx, key, opts...)
		} else {
			lctx, cancel := context.WithTimeout(ctx, r.cfg.TTL/5)
			l, err = eng.Lock(lctx, key, opts...)
			cancel()
		}
		if err != nil {
			if ctx.Err() == nil {
				r.count(r.lockErrs, classify(err), 1)
			}
			continue
		}
		g := history.Grant{Key: key, Holder: holder, Token: l.Token(), GrantedAt: r.rec.Now(), ValidUntil: r.rec.At(l.Until())}
		r.rec.NoteToken(key, g.Token)
		if p.kind == "long" {
			select {
			case r.holds <- holdEvent{key: key, at: time.Now()}:
			default:
			}
		}
		r.section(l, p, &g)
		g.ValidUntil = r.rec.At(l.Until()) // moved by extensions
		g.Released, g.ReleasedAt = true, r.rec.Now()
		// The client does not wait for the release to be confirmed: the
		// engine's Unlock waits for every master (bounded by the master
		// timeout), so one paused or cut-off master would otherwise hold
		// every client to one cycle per master timeout. The release is on
		// its way, ordered before anything this engine sends for the key
		// later; the history already says the holder let go at ReleasedAt.
		r.unlocks.Go(func() {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.Unlock(uctx); err != nil && ctx.Err() == nil {
				r.count(r.unlockErrs, classify(err), 1)
			}
		})
		log.Add(g)
		r.count(r.held, p.kind, 1)
	}
}

// section runs the critical section: it starts only while the lock is
// vouched for, holds it for the plan's time or until the lost-lock signal
// fires, and records whether the signal had fired at its end.
func (r *run) section(l api.Lock, p plan, g *history.Grant) {
	done := l.Done()
	if !vouched(l, done) {
		return // lost before it began: a careful holder does nothing
	}
	g.Ran = true
	g.Start = r.rec.Now()
	g.Due = work(done, p.hold, r.rec.Now)
	g.End = r.rec.Now()
	// The channel read at the start, not a fresh Done(): a fresh call
	// settles the clock and is closed past Until by construction, so it
	// would judge nothing; the channel in hand is what a holder waiting on
	// it gets, closed by the engine's timer.
	g.Signaled = closed(done)
	if !g.Signaled {
		g.StallDue, g.StallRan, _ = r.probe.stallEvidence(r.rec.At(l.Until()), g.End, g.Due)
	}
	r.sections.Add(1)
}

// vouched reports whether a careful holder may begin its section: Done
// (done) is open and the clock is before Until. Done's timer fires on its
// own goroutine, so a holder that got here after Until (its goroutine
// starved) may still find Done open for a moment: it checks the deadline
// too, as the engine's own docs ask.
func vouched(l api.Lock, done <-chan struct{}) bool {
	return !closed(done) && time.Now().Before(l.Until())
}

// work runs a critical section of length d, ended early when done (the
// lost-lock signal) closes. It returns when its timer was due, on now's
// timebase, read after the timer was set so that it is no earlier than the
// timer's own deadline (without a timer, when it began): the evidence the
// checker weighs against an overrun (history.Grant.Due).
func work(done <-chan struct{}, d time.Duration, now func() time.Duration) time.Duration {
	if d <= 0 {
		return now()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	due := now() + d
	select {
	case <-done:
	case <-t.C:
	}
	return due
}

// closed reports whether done has closed by now.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func classify(err error) string {
	var why string
	switch {
	case errors.Is(err, api.ErrQuorumUnreachable):
		why = "quorum_unreachable"
	case errors.Is(err, api.ErrNotAcquired):
		why = "not_acquired"
	case errors.Is(err, api.ErrNotHeld):
		why = "not_held"
	case errors.Is(err, api.ErrClosed):
		why = "closed"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		if why == "" {
			return "timeout" // waited in the engine's local line, no attempt of its own
		}
		return "timeout_" + why
	}
	if why == "" {
		return "other"
	}
	return why
}
