package torture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/faulty"
	"github.com/quorumlock/redlock/transport/redis"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// Reshard (cluster runs only): the slot of a lock key moves to another
// shard of one cluster, a key at a time (MIGRATE), while clients contend
// for it: their ops meet ASK and then MOVED.
const Reshard = "reshard"

// ClusterKinds are the fault kinds of a cluster run (Config.ClusterShards),
// in report order: every kind of a single-server run, and reshards. kill
// and pause hit one shard (a random one) of each victim cluster; latency,
// partition, fence-loss and clock-drift act on an engine's link to a whole
// cluster, as on a server; proxy hits the proxy of one shard or of every
// shard of a cluster, for every engine; address-flip points one shard of
// each victim cluster at a spare server; script-flush storms every shard of
// its victim clusters; client-pause is the single-server fault, with the
// workers' engines over the same clusters (cluster_faults.go).
var ClusterKinds = append(slices.Clone(Kinds), Reshard)

// clusterRun is the cluster part of a run: Masters clusters of
// ClusterShards shards each.
type clusterRun struct {
	nodes [][]*redisproc.Server // [cluster][shard]
	// mu serialises process faults and reshards per cluster: a kill or a
	// pause in the middle of a slot migration would leave the slot half
	// moved, an operator's repair job rather than a fault the lock must
	// survive.
	mu       []sync.Mutex
	moves    int64
	restarts int64
	// proxies are the fault proxies in front of the nodes, which the nodes
	// announce ([cluster][shard]; nil without proxy and address-flip
	// faults); flipped[m][s]: shard s of cluster m reaches a spare (under
	// run.mu).
	proxies [][]*faultproxy.Proxy
	flipped [][]bool
	// transports are every engine's cluster transports, for their TRYAGAIN
	// counts.
	transports []*rediscluster.Transport
}

func (c *Config) validateCluster() error {
	if c.ClusterShards == 0 {
		if slices.Contains(c.Faults, Reshard) {
			return fmt.Errorf("--faults %s needs --cluster-shards", Reshard)
		}
		return nil
	}
	if c.ClusterShards < 1 || c.ClusterShards > 16 {
		return fmt.Errorf("--cluster-shards %d: want 1 to 16", c.ClusterShards)
	}
	if c.Schedule != Mixed {
		return fmt.Errorf("--schedule %s: cluster runs have only the mixed schedule", c.Schedule)
	}
	for _, f := range c.Faults {
		if !slices.Contains(ClusterKinds, f) {
			return fmt.Errorf("--faults %s: not a fault of cluster runs; want a subset of %v", f, ClusterKinds)
		}
	}
	return nil
}

// setupCluster starts the clusters and one engine per Config.Engines over
// all of them, each cluster behind a fault-injecting wrapper.
func (r *run) setupCluster(ctx context.Context) error {
	cl := &clusterRun{nodes: make([][]*redisproc.Server, Masters), mu: make([]sync.Mutex, Masters)}
	r.cl = cl
	errs := make([]error, Masters)
	var wg sync.WaitGroup
	for m := range Masters {
		wg.Go(func() { cl.nodes[m], errs[m] = redisproc.StartCluster(ctx, r.cfg.ClusterShards) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: starting %d clusters of %d shards: %w", ErrSetup, Masters, r.cfg.ClusterShards, err)
	}
	if r.cfg.has(Proxy) || r.cfg.has(AddressFlip) {
		if err := r.proxyClusters(ctx); err != nil {
			return err
		}
	}
	if r.cfg.has(AddressFlip) {
		spares, err := redisproc.Start(ctx, r.quorum)
		if err != nil {
			return fmt.Errorf("%w: starting %d spare redis-servers: %w", ErrSetup, r.quorum, err)
		}
		r.spares, r.sparesUp = spares, time.Now()
	}
	for e := range r.cfg.Engines {
		ts := make([]transport.Transport, Masters)
		row := make([]*faulty.Transport, Masters)
		for m := range cl.nodes {
			ct, err := rediscluster.New(rediscluster.Config{Seeds: r.clusterSeeds(m), Node: redis.Config{OpTimeout: r.cfg.MasterTimeout}})
			if err != nil {
				closeAll(ts[:m])
				return fmt.Errorf("%w: %w", ErrSetup, err)
			}
			cl.transports = append(cl.transports, ct)
			row[m] = faulty.Wrap(ct, faulty.Config{Seed: r.cfg.Seed*1_000_003 + uint64(e*Masters+m)})
			ts[m] = row[m].Sharded() // the engine quarantines each shard
		}
		r.links = append(r.links, row)
		q := api.WithRestartQuarantine(r.cfg.period())
		if !r.cfg.Quarantine {
			q = api.WithoutRestartQuarantine()
		}
		opts := []api.Option{api.WithTTL(r.cfg.TTL), api.WithMasterTimeout(r.cfg.MasterTimeout), q, coordinators(e)}
		if r.cfg.EngineLog != nil {
			h := slog.NewTextHandler(r.cfg.EngineLog, &slog.HandlerOptions{Level: slog.LevelWarn})
			opts = append(opts, api.WithLogger(slog.New(h).With("engine", e+1)))
		}
		eng, err := engine.NewWithTransports(ts, opts...)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSetup, err)
		}
		r.engines = append(r.engines, eng)
	}
	return r.setupPause(ctx)
}

func (r *run) healCluster() {
	if r.cl == nil {
		return
	}
	for m, nodes := range r.cl.nodes {
		r.cl.mu[m].Lock()
		for _, n := range nodes {
			if n.Paused() {
				_ = n.Resume()
			}
		}
		r.cl.mu[m].Unlock()
	}
	r.healClusterProxies()
}

func (r *run) stopCluster() {
	if r.cl == nil {
		return
	}
	r.closeClusterProxies()
	for _, nodes := range r.cl.nodes {
		redisproc.StopAll(nodes)
	}
}

// clusterFault injects one fault of a cluster run.
func (r *run) clusterFault(ctx context.Context, rng *rand.Rand, kind string) {
	switch kind {
	case Kill:
		r.shardKill(ctx, rng, r.howMany(rng, 0.2, 0.25), rng.Float64() < 0.5)
	case Pause:
		r.shardPause(ctx, rng)
	case Latency:
		r.latency(ctx, rng)
	case Partition:
		r.partition(ctx, rng)
	case FenceLoss:
		r.fenceLoss(ctx, rng)
	case ClockDrift:
		r.clockDrift(ctx, rng)
	case Reshard:
		r.reshard(ctx, rng)
	case Proxy:
		r.clusterProxy(ctx, rng)
	case ScriptFlush:
		r.scriptFlush(ctx, rng)
	case AddressFlip:
		r.addressFlip(ctx, rng)
	case ClientPause:
		r.clientPause(ctx, rng)
	}
}

// shardKill kills one shard of each of n clusters and restarts it empty on
// its port (with its nodes.conf: the same node id, owning the same slots,
// and no keys). Targeted, it first waits for a long critical section and
// kills the shard that owns its key.
func (r *run) shardKill(ctx context.Context, rng *rand.Rand, n int, targeted bool) {
	victims := rng.Perm(Masters)[:n]
	slices.Sort(victims)
	key := ""
	what := ""
	if targeted {
		select {
		case <-r.holds:
		default:
		}
		t := time.NewTimer(2 * r.cfg.TTL)
		select {
		case ev := <-r.holds:
			key = ev.key
			what = fmt.Sprintf(" (%v after a long section on %s began, its shard)", time.Since(ev.at).Round(time.Microsecond), ev.key)
			r.count(r.detail, "kill.targeted", 1)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
	shards := make([]int, len(victims))
	for i, m := range victims {
		r.cl.mu[m].Lock()
		shards[i] = rng.IntN(r.cfg.ClusterShards)
		if key != "" {
			if s, err := redisproc.SlotOwner(context.Background(), r.cl.nodes[m], rediscluster.Slot(key)); err == nil {
				shards[i] = s
			}
		}
	}
	defer func() {
		for _, m := range victims {
			r.cl.mu[m].Unlock()
		}
	}()
	killAt := r.rec.Now()
	var wg sync.WaitGroup
	for i, m := range victims {
		wg.Go(r.cl.nodes[m][shards[i]].Kill)
	}
	wg.Wait()
	broken, why, restarted := r.restartAll(victims,
		func(i, m int) func(context.Context) error { return r.cl.nodes[m][shards[i]].Restart },
		func() (bool, string) { return r.clusterFenceBroken(victims) }, "a shard of cluster")
	desc := make([]string, len(victims))
	for i, m := range victims {
		desc[i] = fmt.Sprintf("cluster %d shard %d", m+1, shards[i]+1)
	}
	w := strings.Join(desc, ", ") + " killed, restarted empty" + what
	if broken {
		w += "; fence reset: " + why
		r.rec.Reset(history.Reset{From: killAt, To: restarted + 2*r.cfg.MasterTimeout + 200*time.Millisecond, Why: why})
	}
	r.event(Kill, w, killAt, restarted)
	r.count(r.faults, Kill, 1)
	r.count(r.detail, "kill.shards", int64(n))
	if n >= r.quorum {
		r.count(r.detail, "kill.majority", 1)
	}
}

// clusterFenceBroken is fenceBroken for clusters: it reads every key's
// counter (under its cluster name) from the shards of the clusters that
// were not hit; a shard that does not answer keeps nothing.
func (r *run) clusterFenceBroken(victims []int) (bool, string) {
	time.Sleep(20 * time.Millisecond) // let grants decided before the kill reach the recorder
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
		wg.Go(func() { counters[m] = r.clusterCounters(m) })
	}
	wg.Wait()
	if k, keep, t, short := r.fenceShort(want, counters); short {
		return true, fmt.Sprintf("killed shards of clusters %v: only %d clusters keep %s's counter at %d", oneBased(victims), keep, k, t)
	}
	return false, ""
}

// clusterCounters reads each key's counter on the shards of cluster m
// (one of them has it; the others answer MOVED, which is skipped). A shard
// whose address reaches a spare keeps nothing: its clients do not see the
// node's counters.
func (r *run) clusterCounters(m int) map[string]int64 {
	out := map[string]int64{}
	for s, n := range r.cl.nodes[m] {
		if n.Paused() || !n.Running() || r.isFlipped(m, s) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		c, err := radix.Dial(ctx, "tcp", n.Addr)
		if err != nil {
			cancel()
			continue
		}
		for _, k := range r.fenced {
			var v radix.Maybe
			var s string
			v.Rcv = &s
			if err := c.Do(ctx, radix.Cmd(&v, "HGET", redis.ClusterFenceKey(k), "n")); err != nil || v.Null {
				continue
			}
			if x, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[k] = max(out[k], x)
			}
		}
		c.Close()
		cancel()
	}
	return out
}

// shardPause stops one shard of one cluster (sometimes of two) for up to
// 1.5 TTLs.
func (r *run) shardPause(ctx context.Context, rng *rand.Rand) {
	n := 1
	if rng.Float64() < 0.2 {
		n = 2
	}
	d := uniform(rng, 50*time.Millisecond, r.cfg.TTL*3/2)
	victims := rng.Perm(Masters)[:n]
	at := r.rec.Now()
	var desc []string
	for _, m := range victims {
		s := rng.IntN(r.cfg.ClusterShards)
		desc = append(desc, fmt.Sprintf("cluster %d shard %d", m+1, s+1))
		r.cl.mu[m].Lock()
		if err := r.cl.nodes[m][s].Pause(); err != nil {
			r.cl.mu[m].Unlock()
			continue
		}
		// The cluster's lock is held until the resume: no reshard or kill
		// meets a stopped shard.
		r.after(ctx, d, func() {
			_ = r.cl.nodes[m][s].Resume()
			r.cl.mu[m].Unlock()
		})
	}
	r.event(Pause, fmt.Sprintf("%s stopped for %v", strings.Join(desc, ", "), d), at, at+d)
	r.count(r.faults, Pause, 1)
	r.count(r.detail, "pause.shards", int64(n))
}

// reshard moves the slot of a random lock key (or of the key of a long
// section that just began) to another shard of one random cluster, a key
// at a time, pausing between keys so that clients meet the half-moved slot.
func (r *run) reshard(ctx context.Context, rng *rand.Rand) {
	if r.cfg.ClusterShards < 2 {
		return
	}
	m := rng.IntN(Masters)
	key := r.keys[rng.IntN(len(r.keys))]
	slot := rediscluster.Slot(key)
	gap := uniform(rng, time.Millisecond, r.cfg.TTL/4)
	r.cl.mu[m].Lock()
	defer r.cl.mu[m].Unlock()
	nodes := r.cl.nodes[m]
	src, err := redisproc.SlotOwner(context.Background(), nodes, slot)
	if err != nil {
		r.count(r.detail, "reshard.failed", 1)
		return
	}
	dst := (src + 1 + rng.IntN(len(nodes)-1)) % len(nodes)
	at := r.rec.Now()
	mctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	moved := 0
	err = redisproc.MigrateSlot(mctx, nodes, nodes[src], nodes[dst], slot, 1, func() error {
		moved++
		sleep(ctx, gap) // the slot stays half moved for a while
		return nil
	})
	what := fmt.Sprintf("cluster %d: slot %d (%s) from shard %d to %d, %d keys, %v between keys", m+1, slot, key, src+1, dst+1, moved, gap)
	if err != nil {
		what += ": " + err.Error()
		r.count(r.detail, "reshard.failed", 1)
	}
	r.event(Reshard, what, at, r.rec.Now())
	r.count(r.faults, Reshard, 1)
	r.count(r.detail, "reshard.keys", int64(moved))
	// The rounds the engines' transports resent ops after TRYAGAIN so far
	// (a fenced acquire on a half-moved slot).
	var again int64
	for _, t := range r.cl.transports {
		again += t.TryAgains()
	}
	r.mu.Lock()
	r.detail["reshard.tryagain_rounds"] = again
	r.mu.Unlock()
}
