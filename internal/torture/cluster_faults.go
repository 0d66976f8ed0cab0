package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// The single-server fault kinds that are built around one server per
// master (proxy, address-flip, script-flush, client-pause), on clusters.
//
// Proxies: a cluster's clients do not stay on the addresses they were
// given. The slot map (CLUSTER SLOTS) and every MOVED and ASK reply name
// the nodes' own addresses, so a client that reached a node through a proxy
// would follow those to the node itself and leave the proxy behind. Each
// node therefore gets one fault proxy in front of it and announces the
// proxy's port as its own (cluster-announce-port, kept across restarts;
// the bus port stays the node's): the slot map, MOVED and ASK then name the
// proxies, and every engine's and worker's connection to a shard, the
// redirected ones included, goes through its proxy. The cost: one proxy per
// node for everybody, so a proxy fault hits a shard for all engines (the
// single-server torture can also hit one engine's link alone; the
// transport/faulty wrapper still does that on clusters, for latency and
// partitions). The torture's own reads (fencing counters, MIGRATE, slot
// owners) go to the nodes directly.
//
// Address flip: a shard's proxy is pointed at a spare, long-running, empty
// standalone redis-server and its connections reset, so the shard's address
// reaches another server with a new run id and a long uptime (the cluster's
// run id changes with it). The spare answers plain commands (it is no
// cluster node: no MOVED, no slot map), which is the point: it holds none
// of the shard's keys and counters.

// flushAddrs are the servers a script-flush storm on master m hits: the
// server behind it, or every node of cluster m.
func (r *run) flushAddrs(m int) []string {
	if r.cl == nil {
		return []string{r.serverAddr(m)}
	}
	out := make([]string, len(r.cl.nodes[m]))
	for s, n := range r.cl.nodes[m] {
		out[s] = n.Addr
	}
	return out
}

// clusterSeeds are cluster m's seed addresses for its clients: its
// proxies when it has them.
func (r *run) clusterSeeds(m int) []string {
	seeds := make([]string, len(r.cl.nodes[m]))
	for s, n := range r.cl.nodes[m] {
		seeds[s] = n.Addr
		if r.cl.proxies != nil {
			seeds[s] = r.cl.proxies[m][s].Addr()
		}
	}
	return seeds
}

// workerMasters are the masters of the client-pause workers, as engine.New
// takes them: servers, or clusters by their seeds (';' between seeds: the
// worker's list of masters is comma-separated).
func (r *run) workerMasters() []string {
	out := make([]string, Masters)
	for m := range Masters {
		if r.cl != nil {
			out[m] = rediscluster.Scheme + "://" + strings.Join(r.clusterSeeds(m), ";")
		} else {
			out[m] = r.servers[m].Addr
		}
	}
	return out
}

// proxyClusters puts a fault proxy in front of every node and has the node
// announce it, then waits until every node's slot map names only proxies.
func (r *run) proxyClusters(ctx context.Context) error {
	cl := r.cl
	cl.proxies = make([][]*faultproxy.Proxy, Masters)
	cl.flipped = make([][]bool, Masters)
	for m, nodes := range cl.nodes {
		cl.proxies[m] = make([]*faultproxy.Proxy, len(nodes))
		cl.flipped[m] = make([]bool, len(nodes))
		for s, n := range nodes {
			p, err := faultproxy.New(n.Addr)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrSetup, err)
			}
			cl.proxies[m][s] = p
		}
	}
	errs := make([]error, Masters)
	var wg sync.WaitGroup
	for m, nodes := range cl.nodes {
		wg.Go(func() {
			want := make([]string, len(nodes))
			for s, n := range nodes {
				p := cl.proxies[m][s]
				want[s] = p.Addr()
				port, err := strconv.Atoi(p.Addr()[strings.LastIndexByte(p.Addr(), ':')+1:])
				if err == nil {
					err = n.Announce(ctx, port)
				}
				if err != nil {
					errs[m] = err
					return
				}
			}
			errs[m] = redisproc.WaitAnnounced(ctx, nodes, want)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: clusters announcing their proxies: %w", ErrSetup, err)
	}
	return nil
}

// clusterProxy is the proxy fault on a cluster: on one shard's proxy, or
// on every shard of one cluster.
func (r *run) clusterProxy(ctx context.Context, rng *rand.Rand) {
	m := rng.IntN(Masters)
	ps := r.cl.proxies[m]
	where := fmt.Sprintf("cluster %d (every shard)", m+1)
	if rng.Float64() < 0.6 {
		s := rng.IntN(len(ps))
		ps = ps[s : s+1]
		where = fmt.Sprintf("cluster %d shard %d", m+1, s+1)
		r.count(r.detail, "proxy.shard", 1)
	} else {
		r.count(r.detail, "proxy.cluster", 1)
	}
	r.proxyFault(ctx, rng, ps, where)
}

// flipShards draws the shard of each victim cluster that an address flip
// hits.
func (r *run) flipShards(rng *rand.Rand, victims []int) []int {
	shards := make([]int, len(victims))
	for i := range victims {
		shards[i] = rng.IntN(r.cfg.ClusterShards)
	}
	return shards
}

// flipKeyShards makes a targeted flip hit, in each victim cluster, the
// shard that owns key (the key of the long section that just began).
func (r *run) flipKeyShards(victims, shards []int, key string) {
	if r.cl == nil || key == "" {
		return
	}
	for i, m := range victims {
		if s, err := redisproc.SlotOwner(context.Background(), r.cl.nodes[m], rediscluster.Slot(key)); err == nil {
			shards[i] = s
		}
	}
}

func (r *run) clusterFlipWhat(victims, shards []int, d time.Duration) string {
	desc := make([]string, len(victims))
	for i, m := range victims {
		desc[i] = fmt.Sprintf("cluster %d shard %d", m+1, shards[i]+1)
	}
	return fmt.Sprintf("%s flipped to spare servers for %v", strings.Join(desc, ", "), d)
}

// clusterFlip points the proxy of each victim's shard at a spare (toSpare)
// or back at the shard's node, resets its connections and returns how many
// it reset. While flipped, the shard's counters count as lost
// (clusterCounters).
func (r *run) clusterFlip(victims, shards []int, toSpare bool) int {
	r.mu.Lock()
	for i, m := range victims {
		r.cl.flipped[m][shards[i]] = toSpare
	}
	r.mu.Unlock()
	n := 0
	for i, m := range victims {
		p := r.cl.proxies[m][shards[i]]
		if toSpare {
			p.SetTarget(r.spares[i].Addr)
		} else {
			p.SetTarget(r.cl.nodes[m][shards[i]].Addr)
		}
		n += p.Reset()
	}
	return n
}

// isFlipped: shard s of cluster m's address reaches a spare now.
func (r *run) isFlipped(m, s int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cl.flipped != nil && r.cl.flipped[m][s]
}

func (r *run) healClusterProxies() {
	for _, row := range r.cl.proxies {
		for _, p := range row {
			p.Heal()
			p.SetDelay(0)
		}
	}
}

func (r *run) closeClusterProxies() {
	for _, row := range r.cl.proxies {
		for _, p := range row {
			if p != nil {
				_ = p.Close()
			}
		}
	}
}

// errorStats reads the count of error kind (INFO errorstats, e.g.
// NOSCRIPT) on each server of the masters in victims; a server that does
// not answer is left out.
func (r *run) errorStats(victims []int, kind string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range victims {
		for _, addr := range r.flushAddrs(m) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			var info string
			if err := redisproc.Cmd(ctx, addr, &info, "INFO", "errorstats"); err == nil {
				out[addr] = 0
				for line := range strings.Lines(info) {
					if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_"+kind+":count="); ok {
						if c, err := strconv.ParseInt(rest, 10, 64); err == nil {
							out[addr] = c
						}
					}
				}
			}
			cancel()
		}
	}
	return out
}

// errorsSince is how many errors of kind the servers of victims answered
// since the reading before (errorStats). A server restarted meanwhile (its
// count starts again) counts what it answered since the restart: a lower
// bound.
func (r *run) errorsSince(victims []int, kind string, before map[string]int64) int64 {
	var n int64
	for addr, c := range r.errorStats(victims, kind) {
		if c >= before[addr] {
			n += c - before[addr]
		} else {
			n += c
		}
	}
	return n
}

// dbSize is the number of keys on addr (0 when it does not answer).
func dbSize(addr string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var n int64
	if err := redisproc.Cmd(ctx, addr, &n, "DBSIZE"); err != nil {
		return 0
	}
	return n
}
