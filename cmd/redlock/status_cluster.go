package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// shardStatus is one shard master of a cluster master, as --json prints it.
type shardStatus struct {
	Addr        string  `json:"addr"`
	Slots       int     `json:"slots"`
	Replicas    int     `json:"replicas"`
	Reachable   bool    `json:"reachable"`
	RTTMS       float64 `json:"rtt_ms"`
	RunID       string  `json:"run_id"`
	UptimeS     int64   `json:"uptime_s"`
	Quarantined bool    `json:"quarantined"`
	// Unsafe, Writable and Votes are a single master's (masterStatus),
	// for the keys of the shard's slots: Writable is whether a probe key
	// of one of its slots could be set and deleted.
	Unsafe   string `json:"unsafe,omitempty"`
	Writable *bool  `json:"writable,omitempty"`
	Votes    bool   `json:"votes"`
	Error    string `json:"error"`

	uptime, votesIn time.Duration
	known           bool
	tag             string // a hash tag of the shard's slots ("" if none)
}

// checkCluster is checkMaster for a redis+cluster:// master: one row for
// the cluster and one per shard. The engine quarantines each shard on its
// own: a shard in quarantine does not vote for the keys of its slots, while
// the others vote for theirs. The cluster's row counts it as a vote only
// when every shard answers, none is in quarantine, none is unsafe and each
// sets and deletes a probe key of its own slots, since only then does it
// vote for every key; it shows the longest quarantine of its shards. With
// mem (status --watch), each shard's evicted_keys is compared with the last
// round's, and a shard last seen unsafe kept in quarantine, as the engine
// does each shard's.
func checkCluster(ctx context.Context, addr string, o statusOptions, mem *masterMemory) masterStatus {
	cfg, err := rediscluster.ParseAddr(addr)
	if err != nil {
		return masterStatus{Addr: addr, Error: err.Error()}
	}
	cfg.Node.DialTimeout, cfg.Node.OpTimeout = o.Timeout, o.Timeout
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	t, err := rediscluster.New(cfg)
	if err != nil {
		return masterStatus{Addr: addr, Error: err.Error()}
	}
	defer t.Close()
	m := masterStatus{Addr: t.Name()}
	start := time.Now()
	shards, err := t.Shards(ctx)
	if errors.Is(err, rediscluster.ErrFailoverRisk) {
		m.FailoverRisk = true
	}
	if shards == nil {
		m.Error = err.Error()
		return m
	}
	m.rtt = time.Since(start)
	m.Reachable, m.known = true, true
	var ids []string
	var at time.Time
	if mem != nil {
		at = mem.now()
	}
	var keptLeft time.Duration // the longest a shard is kept out since it was last seen unsafe
	var keptWhy string         // the first such shard's reason
	for i, s := range shards {
		ss := shardStatus{Addr: s.Addr, Slots: s.Slots, Replicas: s.Replicas, Reachable: s.Reachable, tag: s.Tag}
		m.Replicas += s.Replicas
		if s.Reachable {
			ss.RTTMS = math.Round(float64(s.RTT)/1e3) / 1e3
		} else {
			m.Reachable = false
		}
		if s.Err != nil {
			ss.Error = s.Err.Error()
			m.known = false
		} else {
			ss.known, ss.RunID, ss.uptime, ss.UptimeS = true, s.Info.RunID, s.Info.Uptime, int64(s.Info.Uptime/time.Second)
			if o.Quarantine > 0 && s.Info.Uptime < o.Quarantine {
				ss.Quarantined, ss.votesIn = true, o.Quarantine-s.Info.Uptime
			}
			var evicted, evictedShort, seen string
			var c *processMemory
			if mem != nil {
				c = mem.shard(s.Addr)
				evicted, evictedShort = c.observe(s.Info, at)
			}
			switch {
			case s.Info.ReplicaOf != "":
				ss.Unsafe, seen = "replica of "+s.Info.ReplicaOf+": its keys follow its master's", "a replica of "+s.Info.ReplicaOf
			case s.Info.Eviction != "":
				ss.Unsafe, seen = "evicts keys, a held lock's among them: "+s.Info.Eviction+" (CONFIG SET maxmemory-policy noeviction)", "evicts keys: "+s.Info.Eviction
			case evicted != "":
				ss.Unsafe, seen = evicted, evictedShort
			}
			if c != nil {
				c.saw(seen, at)
				if left, why := c.keptOut(o.Quarantine, ss.votesIn, at); left > 0 {
					ss.Quarantined, ss.votesIn, ss.Error = true, max(ss.votesIn, left), why
					if keptWhy == "" {
						keptWhy = "shard " + s.Addr + " " + why
					}
					keptLeft = max(keptLeft, left)
				}
			}
			if ss.Unsafe != "" {
				ss.Error = "does not vote: " + ss.Unsafe
				if m.Unsafe == "" {
					m.Unsafe = "shard " + s.Addr + " " + ss.Unsafe
				}
			}
			ids = append(ids, s.Info.RunID)
			if i == 0 || s.Info.Uptime < m.uptime {
				m.uptime = s.Info.Uptime
			}
		}
		m.Shards = append(m.Shards, ss)
	}
	m.RTTMS = math.Round(float64(m.rtt)/1e3) / 1e3
	if m.known {
		slices.Sort(ids)
		m.RunID, m.UptimeS = "cluster:"+strings.Join(ids, ","), int64(m.uptime/time.Second)
		if o.Quarantine > 0 && m.uptime < o.Quarantine {
			m.Quarantined, m.votesIn = true, o.Quarantine-m.uptime
		}
		if keptLeft > 0 {
			m.Quarantined, m.votesIn = true, max(m.votesIn, keptLeft)
		}
	}
	switch {
	case err != nil:
		// Refused (replicas without ?allow-failover=true): the engine
		// counts no vote from it.
		m.Error, m.known = err.Error(), false
	case m.Unsafe != "":
		m.Error = "does not vote: " + m.Unsafe
	case m.known:
		// As for a single master: each shard must take a key of its own
		// slots, or the cluster cannot grant locks on those slots' keys.
		if perr := probeShards(ctx, t, m.Shards); perr != nil {
			m.Writable, m.Error = new(false), "cannot hold a lock: "+perr.Error()
		} else {
			m.Writable = new(true)
		}
	}
	if m.Error == "" && m.Quarantined {
		m.Error = keptWhy
	}
	for i := range m.Shards {
		s := &m.Shards[i]
		s.Votes = m.known && s.Reachable && s.known && !s.Quarantined && s.Unsafe == "" && s.Writable != nil && *s.Writable
	}
	return m
}

// probeShards sends every shard a write probe (probeWrite) of a key of its
// own slots, all at once, and records each one's outcome; it returns the
// first shard's failure, or nil when every shard could hold a lock's key.
func probeShards(ctx context.Context, t *rediscluster.Transport, shards []shardStatus) error {
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i := range shards {
		s := &shards[i]
		if s.tag == "" {
			continue // it owns no slot, so it holds no lock's key
		}
		wg.Go(func() {
			ops := probeOps(s.tag)
			res := make([]transport.Result, len(ops))
			served := make([]transport.Served, len(ops))
			err := t.DoServed(ctx, ops, res, served)
			switch {
			case served[0].Shard != "" && served[0].Shard != s.Addr:
				// The slot moved meanwhile: the probe says nothing of
				// this shard.
				err = fmt.Errorf("a probe key of its slots went to %s (the slot map changed)", served[0].Shard)
			case err == nil:
				err = probeResult(res)
			}
			s.Writable = new(err == nil)
			if err != nil {
				s.Error = "cannot hold a lock: " + err.Error()
				errs[i] = fmt.Errorf("shard %s: %w", s.Addr, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// printShards prints a cluster master's shards under its row.
func printShards(w io.Writer, m masterStatus) {
	if m.Shards == nil {
		return
	}
	failover := "no replicas"
	if m.Replicas > 0 {
		failover = fmt.Sprintf("%d replicas: automatic failover can lose acknowledged keys", m.Replicas)
		if !m.FailoverRisk {
			failover += " (accepted with allow-failover)"
		}
	}
	fmt.Fprintf(w, "  %s: %d shards, %s\n", m.Addr, len(m.Shards), failover)
	quarSlots := 0
	for _, s := range m.Shards {
		if s.Quarantined {
			quarSlots += s.Slots
		}
	}
	if quarSlots > 0 {
		// Quarantine is per shard: say what the cluster still votes for.
		fmt.Fprintf(w, "  quarantine is per shard: no vote for the keys of %d of %d slots until their shards' quarantine ends; the other slots' keys have this cluster's vote\n", quarSlots, rediscluster.Slots)
	}
	for _, s := range m.Shards {
		quar := "-"
		if s.known {
			quar = "no"
			if s.Quarantined {
				quar = "yes, votes in " + s.votesIn.String()
			}
		}
		e := ""
		if s.Error != "" {
			e = ", " + oneLine(errors.New(s.Error))
		}
		fmt.Fprintf(w, "    shard %s: reachable %s, slots %d, replicas %d, quarantined %s%s\n", s.Addr, yesNo(s.Reachable), s.Slots, s.Replicas, quar, e)
	}
}

// clusterRunConfig parses master i, a cluster, for redlock run, and
// refuses a seed listed twice (here or as a master of its own).
func clusterRunConfig(i int, addr string, seen map[string]int) (*rediscluster.Config, error) {
	cfg, err := rediscluster.ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("master %d: %w", i+1, err)
	}
	for _, s := range cfg.Seeds {
		id := strings.ToLower(s)
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("masters %d and %d both name %s: a master counted twice would vote twice; list each once", j+1, i+1, id)
		}
		seen[id] = i
	}
	cfg.Node.OpTimeout = api.DefaultOptions().MasterTimeout
	return &cfg, nil
}

// dialCluster is redis.Dial's counterpart for a cluster master of redlock
// run: it waits for the slot map and the shards, and, when they are not
// there yet, hands back a transport that keeps trying.
func dialCluster(ctx context.Context, cfg rediscluster.Config) (t *rediscluster.Transport, connected bool, err error) {
	t, err = rediscluster.Dial(ctx, cfg)
	if err != nil && !errors.Is(err, redis.ErrBadAddress) {
		t, err = rediscluster.New(cfg)
		return t, false, err
	}
	return t, err == nil, err
}
