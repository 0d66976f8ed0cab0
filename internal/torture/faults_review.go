package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4"

	"github.com/quorumlock/redlock/internal/history"
)

// The fault kinds a review of the engine called for (issue 9): each one
// produces the trigger of a bug that the older kinds never produced.

// howMany draws how many masters a fault hits: a majority (share
// majority), two (share two) or one (the rest). It takes one number from
// rng, so a seed replays as before.
func (r *run) howMany(rng *rand.Rand, majority, two float64) int {
	switch x := rng.Float64(); {
	case x < majority:
		return r.quorum
	case x < majority+two:
		return 2
	}
	return 1
}

// victimsOf draws which masters a fault hits: one (share one), a majority
// (share majority) or all (the rest).
func (r *run) victimsOf(rng *rand.Rand, one, majority float64) []int {
	n := Masters
	switch x := rng.Float64(); {
	case x < one:
		n = 1
	case x < one+majority:
		n = r.quorum
	}
	v := rng.Perm(Masters)[:n]
	slices.Sort(v)
	return v
}

// waitHold waits (up to 2 TTLs) for a client to begin a long critical
// section, as a targeted kill does, and says what it waited for; "" when
// no long section began in time. key is the section's lock key. false:
// ctx ended.
func (r *run) waitHold(ctx context.Context) (what, key string, ok bool) {
	select { // a stale announcement does not count
	case <-r.holds:
	default:
	}
	t := time.NewTimer(2 * r.cfg.TTL)
	defer t.Stop()
	select {
	case ev := <-r.holds:
		return fmt.Sprintf(" (%v after a long section on %s began)", time.Since(ev.at).Round(time.Microsecond), ev.key), ev.key, true
	case <-t.C:
		return "", "", true
	case <-ctx.Done():
		return "", "", false
	}
}

// scriptFlush runs SCRIPT FLUSH over and over, for a while, on every master
// (half the time), a majority, or one: every batch with a script that
// reaches a flushed master meets NOSCRIPT and is resent after the load.
// The Redis transport used to resend the NOSCRIPT ops after the whole first
// pass, so a batch [Release(k, v), Acquire(k, v)] ran as SET then DEL: the
// Acquire said OK and left no key (a phantom vote). That batch shape comes
// from a Lock call whose first attempt failed when a local holder of the
// key let go (its cleanup release and its next SET, with the same value,
// share a batch on a busy master); on every master at once, the phantom
// votes make a whole grant that holds nothing, and the next contender gets
// the key while the first holder runs. A storm, not one flush: after one
// flush only the next batch per connection meets NOSCRIPT.
func (r *run) scriptFlush(ctx context.Context, rng *rand.Rand) {
	victims := r.victimsOf(rng, 0.2, 0.3)
	d := uniform(rng, 200*time.Millisecond, 3*r.cfg.TTL/2)
	at := r.rec.Now()
	what := "masters"
	if r.cl != nil {
		what = "clusters (every shard)"
	}
	r.event(ScriptFlush, fmt.Sprintf("%s %v: SCRIPT FLUSH storm for %v", what, oneBased(victims), d), at, at+d)
	var flushes atomic.Int64
	r.faultWG.Go(func() {
		fctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		// What bit: the NOSCRIPT errors the victims answered meanwhile.
		noscript := r.errorStats(victims, "NOSCRIPT")
		defer func() { r.count(r.detail, "script-flush.noscript", r.errorsSince(victims, "NOSCRIPT", noscript)) }()
		var wg sync.WaitGroup
		for _, m := range victims {
			for _, addr := range r.flushAddrs(m) {
				wg.Go(func() { flushes.Add(r.flushStorm(fctx, addr)) })
			}
		}
		wg.Wait()
		r.count(r.detail, "script-flush.flushes", flushes.Load())
	})
	r.count(r.faults, ScriptFlush, 1)
	r.count(r.detail, "script-flush.masters", int64(len(victims)))
	if len(victims) >= r.quorum {
		r.count(r.detail, "script-flush.majority", 1)
	}
}

// flushStorm flushes addr's scripts until ctx ends, and returns how many
// flushes it sent. A master that is down or paused just gets fewer.
func (r *run) flushStorm(ctx context.Context, addr string) int64 {
	var n int64
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		c, err := radix.Dial(dctx, "tcp", addr)
		cancel()
		if err != nil {
			if !sleep(ctx, 5*time.Millisecond) {
				return n
			}
			continue
		}
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			err := c.Do(cctx, radix.Cmd(nil, "SCRIPT", "FLUSH"))
			cancel()
			if err != nil {
				break
			}
			n++
			// A short gap: the flushes must land between the clients'
			// batches, not starve them.
			if !sleep(ctx, 500*time.Microsecond) {
				break
			}
		}
		_ = c.Close()
	}
	return n
}

// serverAddr is the address of the redis-server that master m's links reach
// now: a spare while an address flip is in place.
func (r *run) serverAddr(m int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.flipped != nil && r.flipped[m] != "" {
		return r.flipped[m]
	}
	return r.servers[m].Addr
}

// addressFlip points the addresses of one, two or a majority of masters at
// spare redis-servers: long-running, emptied before each use, never used
// by the engines before (a VIP or DNS flip, a promoted replica, a reused
// port). Every engine's proxy to a victim switches its upstream and resets
// its connections, so the engines reconnect (a new epoch) and find a new
// run id with a long uptime. The engine used to trust that uptime and let
// the master vote at once, although it holds none of the locks granted on
// the address before. A flip of a majority is timed right after a long
// critical section began (as targeted kills are); the flip back, after one
// to three TTLs, is a flip too (the original servers never saw the grants
// made meanwhile).
func (r *run) addressFlip(ctx context.Context, rng *rand.Rand) {
	if !r.flipping.CompareAndSwap(false, true) {
		r.count(r.detail, "address-flip.skipped_busy", 1)
		return
	}
	// The spares must have been up longer than the quarantine period, as
	// Redis reports uptime (whole seconds, less one): else even the old
	// engine would sit them out.
	if time.Since(r.sparesUp) < r.cfg.period()+3*time.Second {
		r.flipping.Store(false)
		r.count(r.detail, "address-flip.skipped_young", 1)
		return
	}
	n := r.howMany(rng, 0.6, 0.2)
	victims := rng.Perm(Masters)[:n]
	slices.Sort(victims)
	d := uniform(rng, r.cfg.TTL, 3*r.cfg.TTL)
	targeted := n >= r.quorum
	var shards []int // cluster runs: the shard of each victim that flips
	if r.cl != nil {
		shards = r.flipShards(rng, victims)
	}
	r.faultWG.Go(func() {
		defer r.flipping.Store(false)
		// Empty the spares first: each stands for a server that never held
		// our keys (nor fencing counters).
		for i := range victims {
			if err := flushAll(r.spares[i].Addr); err != nil {
				r.count(r.detail, "address-flip.flush_failed", 1)
			}
		}
		held := ""
		if targeted {
			s, key, ok := r.waitHold(ctx)
			if !ok {
				return
			}
			if s != "" {
				r.count(r.detail, "address-flip.targeted", 1)
				r.flipKeyShards(victims, shards, key)
			}
			held = s
		}
		what := fmt.Sprintf("masters %v flipped to spare servers for %v", oneBased(victims), d)
		if r.cl != nil {
			what = r.clusterFlipWhat(victims, shards, d)
		}
		what += held
		at := r.rec.Now()
		var conns int
		if r.cl != nil {
			conns = r.clusterFlip(victims, shards, true)
		} else {
			conns = r.flip(victims, func(i, m int) string { return r.spares[i].Addr })
		}
		r.fenceReset(victims, at, "address flip")
		sleep(ctx, d)
		// What bit: the keys the clients wrote on the spares meanwhile.
		for i := range victims {
			r.count(r.detail, "address-flip.spare_keys", dbSize(r.spares[i].Addr))
		}
		back := r.rec.Now()
		if r.cl != nil {
			conns += r.clusterFlip(victims, shards, false)
		} else {
			conns += r.flip(victims, func(_, m int) string { return r.servers[m].Addr })
		}
		r.fenceReset(victims, back, "address flip back")
		r.event(AddressFlip, fmt.Sprintf("%s, %d connections reset", what, conns), at, back)
		r.count(r.detail, "address-flip.conns_reset", int64(conns))
	})
	r.count(r.faults, AddressFlip, 1)
	r.count(r.detail, "address-flip.masters", int64(n))
	if targeted {
		r.count(r.detail, "address-flip.majority", 1)
	}
}

// flip points every engine's (and worker's) proxy to each victim at addr(i, m) and resets
// its connections; it returns how many it reset.
func (r *run) flip(victims []int, addr func(i, m int) string) int {
	r.mu.Lock()
	if r.flipped == nil {
		r.flipped = make([]string, Masters)
	}
	for i, m := range victims {
		a := addr(i, m)
		if a == r.servers[m].Addr {
			a = ""
		}
		r.flipped[m] = a
		r.lastCounter[m] = nil
	}
	r.mu.Unlock()
	n := 0
	for i, m := range victims {
		a := addr(i, m)
		for _, row := range append(r.proxies[:r.cfg.Engines:r.cfg.Engines], r.flipProxies...) {
			p := row[m]
			p.SetTarget(a)
			n += p.Reset()
		}
	}
	return n
}

// fenceReset records a fence reset when the masters in victims (now
// reaching servers with other counters) leave fewer than a majority with
// every key's counter at the largest token granted.
func (r *run) fenceReset(victims []int, at time.Duration, why string) {
	var broken bool
	var detail string
	if r.cl != nil {
		broken, detail = r.clusterFenceBroken(victims)
	} else {
		broken, detail = r.fenceBroken(victims)
	}
	if !broken {
		return
	}
	r.rec.Reset(history.Reset{From: at, To: r.rec.Now() + 2*r.cfg.MasterTimeout + 200*time.Millisecond, Why: why + ": " + detail})
	r.count(r.detail, "fence_resets."+AddressFlip, 1)
}

func flushAll(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(ctx, radix.Cmd(nil, "FLUSHALL"))
}

// fenceLoss loses the fencing write-backs (RaiseFence) to two masters (a
// minority) on every engine's links for a while, and slows one engine's
// links to those two masters by a good part of the master timeout, so that
// one engine's attempt there lands late. The engine used to take as token
// the largest count in its grants' replies, trusting that the last grant's
// token had reached a majority that its own majority meets; but a reply can
// predate the write-back on the master they share. The interleaving (issue
// 9, finding 2): lock 2's attempt sets D early; lock 1 wins A, B, C with
// the token of C, its write-back lands only on C, D, E; lock 1 runs and
// lets go; lock 2's slow SETs land on A and B, whose counts lag; lock 2 is
// granted on D, A, B with a smaller token than lock 1's.
func (r *run) fenceLoss(ctx context.Context, rng *rand.Rand) {
	victims := rng.Perm(Masters)[:Masters-r.quorum]
	slices.Sort(victims)
	d := uniform(rng, 500*time.Millisecond, 3*time.Second)
	slow := rng.IntN(r.cfg.Engines)
	lat := uniform(rng, r.cfg.MasterTimeout/4, r.cfg.MasterTimeout*3/4)
	at := r.rec.Now()
	r.event(FenceLoss, fmt.Sprintf("masters %v: fence write-backs lost for %v; engine %d's links to them +%v", oneBased(victims), d, slow+1, lat), at, at+d)
	for _, m := range victims {
		for e := range r.cfg.Engines {
			r.links[e][m].LoseFences(d)
		}
		r.links[slow][m].SetLatency(lat, lat/4)
	}
	r.after(ctx, d, func() {
		for _, m := range victims {
			r.links[slow][m].SetLatency(0, 0)
		}
	})
	r.count(r.faults, FenceLoss, 1)
}

// clockDrift makes one master, a majority or all of them run a fast clock
// (Config.ClockDrift) for a while: the TTLs that reach them are divided by
// 1+drift, so they expire keys that much early. Within the engine's drift
// allowance (1% of the TTL plus 2ms) nothing may break; well past it (say
// 30% on a majority) the lock outlives the keys that make it and the
// checker must report overlaps: the negative control of the clock
// assumption.
func (r *run) clockDrift(ctx context.Context, rng *rand.Rand) {
	victims := r.victimsOf(rng, 0.25, 0.5)
	d := uniform(rng, 2*r.cfg.TTL, 6*r.cfg.TTL)
	rate := 1 + r.cfg.ClockDrift
	at := r.rec.Now()
	r.event(ClockDrift, fmt.Sprintf("masters %v: clock %.3g%% fast for %v", oneBased(victims), 100*r.cfg.ClockDrift, d), at, at+d)
	for _, m := range victims {
		for e := range r.cfg.Engines {
			r.links[e][m].SetClockRate(rate)
		}
	}
	r.after(ctx, d, func() {
		for _, m := range victims {
			for e := range r.cfg.Engines {
				r.links[e][m].SetClockRate(1)
			}
		}
	})
	r.count(r.faults, ClockDrift, 1)
	r.count(r.detail, "clock-drift.masters", int64(len(victims)))
	if len(victims) >= r.quorum {
		r.count(r.detail, "clock-drift.majority", 1)
	}
}
