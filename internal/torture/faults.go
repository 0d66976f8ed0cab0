package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
)

// schedule injects faults until ctx ends. What it injects (kinds, targets,
// durations) is drawn from the seed; when exactly it lands depends on the
// machine.
func (r *run) schedule(ctx context.Context) {
	rng := r.rngFor(0xfa17)
	var kinds []string
	for _, k := range append(slices.Clone(Kinds), Reshard) {
		if r.cfg.has(k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		<-ctx.Done()
		return
	}
	for {
		d := time.Duration((0.5 + rng.Float64()) * float64(r.cfg.FaultInterval))
		if !sleep(ctx, d) {
			return
		}
		if r.cfg.Schedule == SplitBrain {
			r.kill(ctx, rng, r.quorum, true)
			continue
		}
		kind := kinds[rng.IntN(len(kinds))]
		if r.cl != nil {
			r.clusterFault(ctx, rng, kind)
			continue
		}
		switch kind {
		case Kill:
			r.kill(ctx, rng, r.howMany(rng, 0.2, 0.25), rng.Float64() < 0.5)
		case Pause:
			r.pause(ctx, rng)
		case Latency:
			r.latency(ctx, rng)
		case Partition:
			r.partition(ctx, rng)
		case Proxy:
			r.proxy(ctx, rng)
		case ScriptFlush:
			r.scriptFlush(ctx, rng)
		case AddressFlip:
			r.addressFlip(ctx, rng)
		case FenceLoss:
			r.fenceLoss(ctx, rng)
		case ClockDrift:
			r.clockDrift(ctx, rng)
		case ClientPause:
			r.clientPause(ctx, rng)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// after runs heal once d has passed or the schedule stops, whichever is
// first, so that every fault is healed before the run ends.
func (r *run) after(ctx context.Context, d time.Duration, heal func()) {
	r.faultWG.Go(func() {
		sleep(ctx, d)
		heal()
	})
}

func uniform(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// kill kills n masters with SIGKILL and restarts them empty on their ports
// at once. Targeted, it first waits (up to 2 TTLs) for a client to begin a
// long critical section, and kills right then: the lock is live, its holder
// is inside, and competitors are waiting.
func (r *run) kill(ctx context.Context, rng *rand.Rand, n int, targeted bool) {
	victims := rng.Perm(Masters)[:n]
	slices.Sort(victims)
	what := fmt.Sprintf("masters %v killed, restarted empty", oneBased(victims))
	if targeted {
		select { // a stale announcement does not count
		case <-r.holds:
		default:
		}
		t := time.NewTimer(2 * r.cfg.TTL)
		select {
		case ev := <-r.holds:
			what += fmt.Sprintf(" (%v after a long section on %s began)", time.Since(ev.at).Round(time.Microsecond), ev.key)
			r.count(r.detail, "kill.targeted", 1)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
	for _, m := range victims {
		r.serverMu[m].Lock()
	}
	defer func() {
		for _, m := range victims {
			r.serverMu[m].Unlock()
		}
	}()
	killAt := r.rec.Now()
	var wg sync.WaitGroup
	for _, m := range victims {
		wg.Go(r.servers[m].Kill)
	}
	wg.Wait()
	// Restart at once, on the same ports, empty. The restart does not
	// depend on ctx: a run that ends meanwhile stops the servers anyway.
	for _, m := range victims {
		r.mu.Lock()
		r.lastCounter[m] = nil
		r.mu.Unlock()
	}
	broken, why, restarted := r.restartAll(victims,
		func(_, m int) func(context.Context) error { return r.servers[m].Restart },
		func() (bool, string) { return r.fenceBroken(victims) }, "master")
	if broken {
		what += "; fence reset: " + why
	}
	r.event(Kill, what, killAt, restarted)
	if broken {
		// Tokens of grants on either side are not compared: a grant whose
		// attempt was in flight during the restart is decided within two
		// master timeouts (acquire, fence write-back) after it.
		r.rec.Reset(history.Reset{From: killAt, To: restarted + 2*r.cfg.MasterTimeout + 200*time.Millisecond, Why: why})
	}
	r.count(r.faults, Kill, 1)
	r.count(r.detail, "kill.masters", int64(n))
	if n >= r.quorum {
		r.count(r.detail, "kill.majority", 1)
	}
}

// fenceBroken reports whether killing victims left fewer than a majority
// of masters with every key's fencing counter at the largest token granted:
// the precondition of the fencing claim. It reads the counters of the other
// masters directly (past proxies and faults); a master that does not answer
// (paused) counts with its last reading, or as keeping nothing.
func (r *run) fenceBroken(victims []int) (bool, string) {
	// Let grants decided just before the kill reach the recorder.
	time.Sleep(20 * time.Millisecond)
	want := r.fenceWant()
	if len(want) == 0 {
		return false, ""
	}
	counters := make([]map[string]int64, Masters)
	var wg sync.WaitGroup
	for m := range Masters {
		if slices.Contains(victims, m) {
			continue
		}
		wg.Go(func() {
			if !r.servers[m].Paused() {
				if c, err := r.readCounters(r.serverAddr(m)); err == nil {
					r.mu.Lock()
					r.lastCounter[m] = c
					r.mu.Unlock()
				}
			}
			r.mu.Lock()
			counters[m] = r.lastCounter[m]
			r.mu.Unlock()
		})
	}
	wg.Wait()
	if k, keep, t, short := r.fenceShort(want, counters); short {
		return true, fmt.Sprintf("killed masters %v: only %d masters keep %s's counter at %d", oneBased(victims), keep, k, t)
	}
	return false, ""
}

// restartAll restarts every victim at once (restart(i, m) is victims[i]'s
// restart; a restart does not depend on the run's ctx: a run that ends
// meanwhile stops the servers anyway), while check reads the fencing
// counters of the others. It reports failed restarts (what names a
// victim: "master" or "a shard of cluster") and returns check's answer and
// when every restart was back.
func (r *run) restartAll(victims []int, restart func(i, m int) func(context.Context) error, check func() (bool, string), what string) (broken bool, why string, restarted time.Duration) {
	var wg sync.WaitGroup
	var failed sync.Map
	for i, m := range victims {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := restart(i, m)(rctx); err != nil {
				failed.Store(m, err)
			}
		})
	}
	broken, why = check()
	wg.Wait()
	restarted = r.rec.Now()
	failed.Range(func(k, v any) bool {
		r.count(r.detail, "kill.restart_failed", 1)
		if r.cfg.Progress != nil {
			fmt.Fprintf(r.cfg.Progress, "redlock torture: restarting %s %d: %v\n", what, k.(int)+1, v)
		}
		return true
	})
	return broken, why, restarted
}

// fenceWant is the largest token granted of every key that has one: what
// a master must keep for the fencing claim to hold.
func (r *run) fenceWant() map[string]int64 {
	want := make(map[string]int64, len(r.fenced))
	for _, k := range r.fenced {
		if t := r.rec.MaxToken(k); t > 0 {
			want[k] = t
		}
	}
	return want
}

// fenceShort finds a key whose counter fewer than a majority of masters
// keep at its largest token (counters[m] is master m's reading, nil for
// none), and how many do.
func (r *run) fenceShort(want map[string]int64, counters []map[string]int64) (key string, keep int, token int64, short bool) {
	for _, k := range r.fenced {
		t, ok := want[k]
		if !ok {
			continue
		}
		keep := 0
		for m := range counters {
			if counters[m][k] >= t {
				keep++
			}
		}
		if keep < r.quorum {
			return k, keep, t, true
		}
	}
	return "", 0, 0, false
}

func oneBased(ms []int) []int {
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = m + 1
	}
	return out
}

// readCounters reads every fenced key's counter on one master.
func (r *run) readCounters(addr string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	vals := make([]string, len(r.fenced))
	nulls := make([]radix.Maybe, len(r.fenced))
	p := radix.NewPipeline()
	for i, k := range r.fenced {
		nulls[i] = radix.Maybe{Rcv: &vals[i]}
		// The count is field "n" of the counter's hash (transport.AcquireFenced).
		p.Append(radix.Cmd(&nulls[i], "HGET", transport.FenceKey(k), "n"))
	}
	if err := c.Do(ctx, p); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(r.fenced))
	for i, k := range r.fenced {
		if nulls[i].Null {
			continue
		}
		n, err := strconv.ParseInt(vals[i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("counter of %s: %w", k, err)
		}
		out[k] = n
	}
	return out, nil
}

// pause stops one master (sometimes two) with SIGSTOP for up to 1.5 TTLs.
func (r *run) pause(ctx context.Context, rng *rand.Rand) {
	n := 1
	if rng.Float64() < 0.2 {
		n = 2
	}
	d := uniform(rng, 50*time.Millisecond, r.cfg.TTL*3/2)
	victims := rng.Perm(Masters)[:n]
	at := r.rec.Now()
	r.event(Pause, fmt.Sprintf("masters %v stopped for %v", oneBased(victims), d), at, at+d)
	for _, m := range victims {
		r.serverMu[m].Lock()
		err := r.servers[m].Pause()
		r.serverMu[m].Unlock()
		if err != nil {
			continue
		}
		r.after(ctx, d, func() {
			r.serverMu[m].Lock()
			_ = r.servers[m].Resume()
			r.serverMu[m].Unlock()
		})
	}
	r.count(r.faults, Pause, 1)
	r.count(r.detail, "pause.masters", int64(n))
	r.count(r.detail, "pause.ms", d.Milliseconds()*int64(n))
}

// targets picks the links a link fault hits: every engine's link to one
// master (the master is slow or cut off for everyone), or one engine's link
// to one master (asymmetric: only that engine sees it).
func (r *run) targets(rng *rand.Rand, kind string) ([]link, string) {
	m := rng.IntN(Masters)
	if rng.Float64() < 0.5 {
		r.count(r.detail, kind+".master", 1)
		out := make([]link, r.cfg.Engines)
		for e := range out {
			out[e] = link{e, m}
		}
		return out, fmt.Sprintf("master %d", m+1)
	}
	r.count(r.detail, kind+".link", 1)
	e := rng.IntN(r.cfg.Engines)
	return []link{{e, m}}, fmt.Sprintf("engine %d's link to master %d", e+1, m+1)
}

type link struct{ e, m int }

func (r *run) faulty(l link) *faulty.Transport { return r.links[l.e][l.m] }

func (r *run) proxyOf(l link) *faultproxy.Proxy { return r.proxies[l.e][l.m] }

// latency slows links by up to 1.2 master timeouts (plus jitter) for up to
// 3s: some ops then time out.
func (r *run) latency(ctx context.Context, rng *rand.Rand) {
	ls, where := r.targets(rng, Latency)
	lat := uniform(rng, time.Millisecond, r.cfg.MasterTimeout*6/5)
	jit := uniform(rng, 0, r.cfg.MasterTimeout/2)
	d := uniform(rng, 500*time.Millisecond, 3*time.Second)
	at := r.rec.Now()
	r.event(Latency, fmt.Sprintf("%s: +%v (jitter %v) for %v", where, lat, jit, d), at, at+d)
	for _, l := range ls {
		r.faulty(l).SetLatency(lat, jit)
	}
	r.after(ctx, d, func() {
		for _, l := range ls {
			r.faulty(l).SetLatency(0, 0)
		}
	})
	r.count(r.faults, Latency, 1)
}

// partition cuts links off: fully (fail fast, nothing applied) or one way
// (ops applied, replies lost: the timed-out SET that did land).
func (r *run) partition(ctx context.Context, rng *rand.Rand) {
	ls, where := r.targets(rng, Partition)
	at := r.rec.Now()
	if rng.Float64() < 0.65 {
		d := uniform(rng, 100*time.Millisecond, 2*time.Second)
		for _, l := range ls {
			r.faulty(l).Partition(d)
		}
		r.count(r.detail, "partition.full", 1)
		r.event(Partition, fmt.Sprintf("%s: unreachable for %v", where, d), at, at+d)
	} else {
		d := uniform(rng, 50*time.Millisecond, 500*time.Millisecond)
		for _, l := range ls {
			r.faulty(l).DropReplies(d)
		}
		r.count(r.detail, "partition.replies_lost", 1)
		r.event(Partition, fmt.Sprintf("%s: replies lost (ops applied) for %v", where, d), at, at+d)
	}
	r.count(r.faults, Partition, 1)
}

// proxy hits real TCP connections: RST resets, cuts (bytes held, then
// delivered late) and delays.
func (r *run) proxy(ctx context.Context, rng *rand.Rand) {
	ls, where := r.targets(rng, Proxy)
	ps := make([]*faultproxy.Proxy, len(ls))
	for i, l := range ls {
		ps[i] = r.proxyOf(l)
	}
	r.proxyFault(ctx, rng, ps, where)
}

// proxyFault injects one proxy fault on every proxy in ps (one link's, or
// one cluster shard's: clusterProxy).
func (r *run) proxyFault(ctx context.Context, rng *rand.Rand, ps []*faultproxy.Proxy, where string) {
	at := r.rec.Now()
	switch x := rng.Float64(); {
	case x < 0.35:
		n := 0
		for _, p := range ps {
			n += p.Reset()
		}
		r.count(r.detail, "proxy.reset", 1)
		r.count(r.detail, "proxy.reset_conns", int64(n))
		r.event(Proxy, fmt.Sprintf("%s: %d connections reset (RST)", where, n), at, at)
	case x < 0.7:
		d := uniform(rng, 50*time.Millisecond, r.cfg.TTL*3/2)
		for _, p := range ps {
			p.Cut(d)
		}
		r.count(r.detail, "proxy.cut", 1)
		r.event(Proxy, fmt.Sprintf("%s: cut (bytes held) for %v", where, d), at, at+d)
	default:
		lat := uniform(rng, time.Millisecond, r.cfg.MasterTimeout*6/5)
		d := uniform(rng, 500*time.Millisecond, 3*time.Second)
		r.event(Proxy, fmt.Sprintf("%s: +%v one-way delay for %v", where, lat, d), at, at+d)
		for _, p := range ps {
			p.SetDelay(lat)
		}
		r.after(ctx, d, func() {
			for _, p := range ps {
				p.SetDelay(0)
			}
		})
		r.count(r.detail, "proxy.delay", 1)
	}
	r.count(r.faults, Proxy, 1)
}
