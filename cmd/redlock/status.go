package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

func init() { register(newStatusCmd) }

// statusOptions configures status; see the flags for what each means.
type statusOptions struct {
	Nodes      []string
	JSON       bool
	Quarantine time.Duration // 0: off
	Timeout    time.Duration // per master: connect, PING and INFO
	Watch      time.Duration // > 0: redraw every Watch until interrupted
}

func defaultStatusOptions() statusOptions {
	return statusOptions{Quarantine: api.DefaultOptions().TTL, Timeout: 2 * time.Second}
}

func newStatusCmd() *cobra.Command {
	o := defaultStatusOptions()
	var nodes string
	cmd := &cobra.Command{
		Use:   "status [flags]",
		Short: "Show each master's health and whether a quorum can grant locks",
		Long: `status connects to every master (--nodes or ` + nodesEnv + `) at once and shows one
row per master: whether it answers, the round-trip time of a PING, its run_id and
uptime, and whether it is in restart quarantine (up for less than --quarantine,
so it does not vote yet: it may have forgotten locks when it restarted). A
master that is a replica, or evicts keys under a memory limit (maxmemory with a
policy other than noeviction), does not vote either, and one that refuses to set
and delete a probe key of its own (redlock-status:..., full under noeviction, a
read-only replica, an ACL without SET) cannot grant a lock; the ERROR column
says which. A Redis Cluster master gets a row per shard, and each shard a probe
key of its own slots: the cluster votes only if every shard can hold a lock. Then whether the quorum is healthy: at least N/2+1 masters can
vote, so locks can be granted.

--quarantine should be what the lock takers use: their largest --ttl (10s by
default), or their --quarantine.

--watch also compares each master's (each shard's) evicted_keys with the last
round that read the same process (run_id): a count that moved, up or down
(CONFIG RESETSTAT), means it dropped keys, maybe a lock's, so that round shows
it not voting, as the engine would, and it stays in quarantine for
--quarantine from that round (with --quarantine 0, until a round finds the
count unchanged). A new run_id (a restart) starts the comparison afresh.
With --quarantine, a master found unsafe for any other reason too (a
replica, an evicting policy) stays in quarantine for --quarantine after the
last round that found it so, as the engine keeps it out: it may have dropped
a lock's key meanwhile. And one whose run_id changed between two rounds (a
restart, or another server behind the address) stays in quarantine for
--quarantine from the round that found the change, whatever the new
process's uptime, as the engine keeps it out from the read that found it.

Exit status: 0 when the quorum is healthy, 1 when it is not, 2 on a usage or
setup error.`,
		Example: `  redlock status --nodes 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379,10.0.0.4:6379,10.0.0.5:6379

  # the masters from the environment, as one JSON object
  REDLOCK_NODES=redis://:secret@r1:6379,r2:6379,r3:6379 redlock status --json

  # in a script: wait until locks with a 1m TTL can be taken
  until redlock status --quarantine 1m >/dev/null; do sleep 5; done`,
		Args: flagsOnly("status"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Nodes = masters(cmd, nodes)
			if err := o.validate(); err != nil {
				return usageErr(err)
			}
			if o.Watch > 0 {
				return watchStatus(cmd.Context(), cmd.OutOrStdout(), o)
			}
			return status(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodes, "nodes", "", "comma-separated Redis masters ("+nodesForms+"); default $"+nodesEnv)
	f.BoolVar(&o.JSON, "json", false, "print one JSON object instead of the table")
	f.DurationVar(&o.Quarantine, "quarantine", o.Quarantine, "restart quarantine: a master up for less does not vote; 0 for none")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long each master may take to connect and answer")
	f.DurationVar(&o.Watch, "watch", 0, "redraw the table every DURATION until interrupted (exit status 0)")
	f.SortFlags = false
	return cmd
}

func (o *statusOptions) validate() error {
	switch {
	case len(o.Nodes) == 0:
		return errors.New("no masters: give --nodes or set " + nodesEnv)
	case len(o.Nodes) > api.MaxMasters:
		return fmt.Errorf("%d masters: at most %d", len(o.Nodes), api.MaxMasters)
	case o.Quarantine < 0:
		return fmt.Errorf("--quarantine %v: want 0 (none) or more", o.Quarantine)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration", o.Timeout)
	case o.Watch < 0:
		return fmt.Errorf("--watch %v: want a positive duration (or leave it out for one report)", o.Watch)
	}
	seen := make(map[string]int, len(o.Nodes))
	for i, addr := range o.Nodes {
		if rediscluster.IsAddr(addr) {
			if _, err := rediscluster.ParseAddr(addr); err != nil {
				return fmt.Errorf("master %d: %w", i+1, err)
			}
			continue
		}
		cfg, err := redis.ParseAddr(addr)
		if err != nil {
			return fmt.Errorf("master %d: %w", i+1, err)
		}
		id := strings.ToLower(cfg.Addr)
		if j, dup := seen[id]; dup {
			return fmt.Errorf("masters %d and %d are both %s: list each master once", j+1, i+1, id)
		}
		seen[id] = i
	}
	return nil
}

// statusReport is what status finds, as --json prints it.
type statusReport struct {
	Masters []masterStatus `json:"masters"`
	Quorum  int            `json:"quorum"`  // masters needed: N/2+1
	Healthy bool           `json:"healthy"` // at least Quorum masters can vote

	voters int
}

// masterStatus is one master, as --json prints it. Quarantined: up for less
// than --quarantine (it may have forgotten locks when it restarted), or,
// with --watch, a round less than --quarantine ago found it unsafe (its
// evicted_keys moved, an evicting policy, a replica) or found another run_id
// behind it than the round before (Error says so).
type masterStatus struct {
	Addr        string  `json:"addr"`
	Reachable   bool    `json:"reachable"`
	RTTMS       float64 `json:"rtt_ms"`
	RunID       string  `json:"run_id"`
	UptimeS     int64   `json:"uptime_s"`
	Quarantined bool    `json:"quarantined"`
	// Unsafe says why the master's configuration can drop a lock's key
	// (a replica, or an eviction policy under a memory limit), or, with
	// --watch, that it dropped keys since the last round that read it
	// (its evicted_keys moved); the engine counts no vote from it.
	Unsafe string `json:"unsafe,omitempty"`
	// Writable: whether a probe key could be set and deleted (on a Redis
	// Cluster master: one in each shard's slots, and every one could);
	// absent when not tried (the master is unreachable, unsafe, or its
	// INFO unread). A master that refuses SET (OOM, READONLY, NOPERM)
	// cannot grant a lock.
	Writable *bool `json:"writable,omitempty"`
	// Votes: the master counts towards the quorum.
	Votes bool   `json:"votes"`
	Error string `json:"error"`
	// A Redis Cluster master (redis+cluster://): its shards, its replicas,
	// and whether it is refused for them (status_cluster.go).
	Shards       []shardStatus `json:"shards,omitempty"`
	Replicas     int           `json:"replicas,omitempty"`
	FailoverRisk bool          `json:"failover_risk,omitempty"`

	rtt, uptime, votesIn time.Duration
	known                bool // run_id and uptime were read
}

// votes reports whether the master counts towards a quorum.
func (m *masterStatus) votes() bool {
	return m.Reachable && m.known && !m.Quarantined && m.Unsafe == "" && (m.Writable == nil || *m.Writable)
}

// status checks every master and prints the report. It returns nil when the
// quorum is healthy, else an *exitError.
func status(ctx context.Context, w io.Writer, o statusOptions) error {
	rep := checkMasters(ctx, o, nil)
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	}
	if o.JSON {
		if err := json.NewEncoder(w).Encode(rep); err != nil {
			return &exitError{code: exitFailure, err: err}
		}
	} else {
		printStatus(w, rep, o)
	}
	if !rep.Healthy {
		return &exitError{code: exitFailure}
	}
	return nil
}

// checkMasters checks every master at once; mem is what the rounds of
// status --watch before this one read (nil for a single report).
func checkMasters(ctx context.Context, o statusOptions, mem *watchMemory) *statusReport {
	rep := &statusReport{Masters: make([]masterStatus, len(o.Nodes)), Quorum: len(o.Nodes)/2 + 1}
	var wg sync.WaitGroup
	for i, addr := range o.Nodes {
		wg.Go(func() { rep.Masters[i] = checkMaster(ctx, addr, o, mem.master(i)) })
	}
	wg.Wait()
	for i := range rep.Masters {
		if rep.Masters[i].Votes = rep.Masters[i].votes(); rep.Masters[i].Votes {
			rep.voters++
		}
	}
	rep.Healthy = rep.voters >= rep.Quorum
	return rep
}

// checkMaster connects to one master, PINGs it and reads INFO server; mem
// (nil for a single report) is what the rounds before read of it.
func checkMaster(ctx context.Context, addr string, o statusOptions, mem *masterMemory) masterStatus {
	if rediscluster.IsAddr(addr) {
		return checkCluster(ctx, addr, o, mem)
	}
	cfg, err := redis.ParseAddr(addr) // validated already
	m := masterStatus{Addr: cfg.Addr}
	if err != nil {
		m.Error = err.Error()
		return m
	}
	cfg.DialTimeout, cfg.OpTimeout = o.Timeout, o.Timeout
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	t, err := redis.Dial(ctx, cfg)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer t.Close()
	start := time.Now()
	if err := t.Ping(ctx); err != nil {
		m.Error = err.Error()
		return m
	}
	m.rtt = time.Since(start)
	m.Reachable, m.RTTMS = true, math.Round(float64(m.rtt)/1e3)/1e3
	info, err := t.ServerInfo(ctx)
	if err != nil {
		// A master whose restarts cannot be seen does not vote.
		m.Error = err.Error()
		return m
	}
	m.known, m.RunID, m.uptime, m.UptimeS = true, info.RunID, info.Uptime, int64(info.Uptime/time.Second)
	if o.Quarantine > 0 && info.Uptime < o.Quarantine {
		m.Quarantined, m.votesIn = true, o.Quarantine-info.Uptime
	}
	var evicted, evictedShort, seen string
	var at time.Time
	if mem != nil {
		// Before the configuration's verdict, as the engine: the count
		// is remembered whatever else keeps the master out.
		at = mem.now()
		evicted, evictedShort = mem.observe(info, at)
	}
	switch {
	case info.ReplicaOf != "":
		m.Unsafe, seen = "replica of "+info.ReplicaOf+": its keys follow its master's (REPLICAOF NO ONE, or list independent masters)", "a replica of "+info.ReplicaOf
	case info.Eviction != "":
		m.Unsafe, seen = "evicts keys, a held lock's among them: "+info.Eviction+" (CONFIG SET maxmemory-policy noeviction)", "evicts keys: "+info.Eviction
	case evicted != "":
		m.Unsafe, seen = evicted, evictedShort
	}
	if mem != nil {
		mem.saw(seen, at)
		if left, why := mem.keptOut(o.Quarantine, m.votesIn, at); left > 0 {
			m.Quarantined, m.votesIn, m.Error = true, max(m.votesIn, left), why
		}
	}
	if m.Unsafe != "" {
		m.Error = "does not vote: " + m.Unsafe
		return m
	}
	err = probeWrite(ctx, t, "")
	m.Writable = new(err == nil)
	if err != nil {
		m.Error = "cannot hold a lock: " + err.Error()
	}
	return m
}

// probeWrite sets a key of its own, as a lock does (SET NX PX), and deletes
// it: a master that answers PING and INFO may still refuse every lock (full
// under noeviction, a read-only replica, an ACL without SET).
func probeWrite(ctx context.Context, t transport.Transport, tag string) error {
	ops := probeOps(tag)
	res := make([]transport.Result, len(ops))
	if err := t.Do(ctx, ops, res); err != nil {
		return err
	}
	return probeResult(res)
}

// probeOps are a write probe's ops: the SET NX PX of a key of its own, and
// its release. The key contains tag (a cluster hash tag, "" for none), so
// that it lands in the tag's slot.
func probeOps(tag string) []transport.Op {
	val := rand.Text() // unguessable: no lock's value, nor another status's
	key := "redlock-status:" + tag + val
	return []transport.Op{{Kind: transport.Acquire, Key: key, Value: val, TTL: 5 * time.Second}, {Kind: transport.Release, Key: key, Value: val}}
}

// probeResult is why a write probe's results say the master cannot hold a
// lock, or nil.
func probeResult(res []transport.Result) error {
	for i, r := range res {
		if r.Err != nil {
			return r.Err
		}
		if !r.OK {
			return fmt.Errorf("%s of a probe key of its own refused", []string{"SET NX", "its release"}[i])
		}
	}
	return nil
}

func printStatus(w io.Writer, rep *statusReport, o statusOptions) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MASTER\tREACHABLE\tRTT\tRUN_ID\tUPTIME\tQUARANTINED\tERROR")
	for _, m := range rep.Masters {
		rtt, runID, uptime, quar := "-", "-", "-", "-"
		if m.Reachable {
			rtt = m.rtt.Round(time.Microsecond).String()
		}
		if m.known {
			runID = shortID(m.RunID)
			uptime = m.uptime.String()
			quar = "no"
			if m.Quarantined {
				quar = "yes, votes in " + m.votesIn.String()
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Addr, yesNo(m.Reachable), rtt, runID, uptime, quar, oneLine(errors.New(m.Error)))
	}
	tw.Flush()
	for _, m := range rep.Masters {
		printShards(w, m)
	}
	verdict := "healthy"
	if !rep.Healthy {
		verdict = "NOT healthy"
	}
	// What a vote takes (masterStatus.Votes), so that a master left out
	// for a reason other than its reach is not read as a mystery.
	can := "reachable, writable and safe"
	if o.Quarantine > 0 {
		can = "reachable, writable, safe, and out of --quarantine " + o.Quarantine.String()
	}
	fmt.Fprintf(w, "quorum: %s: %d of %d masters can vote (%s), %d needed\n",
		verdict, rep.voters, len(rep.Masters), can, rep.Quorum)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
