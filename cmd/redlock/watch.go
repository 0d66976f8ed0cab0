package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/quorumlock/redlock/transport"
)

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// watchStatus redraws the per-master table every o.Watch until ctx ends
// (Ctrl-C), then returns nil: watching has no verdict of its own. On a
// terminal each round replaces the last; elsewhere (a pipe, a file) the
// rounds follow each other, each under a line with its time, and --json
// prints one object per line. Unlike a single report, a round compares
// each master's evicted_keys with the round before, and remembers when a
// round last saw it unsafe (watchMemory).
func watchStatus(ctx context.Context, w io.Writer, o statusOptions) error {
	t := time.NewTicker(o.Watch)
	defer t.Stop()
	return watchRounds(ctx, w, o, t.C, time.Now)
}

// watchRounds is watchStatus with its ticks and its clock given, so that a
// test can run the rounds one at a time, change the masters between them
// and move the clock without waiting: a round at once, then one per tick.
func watchRounds(ctx context.Context, w io.Writer, o statusOptions, tick <-chan time.Time, now func() time.Time) error {
	term := isTerminal(w)
	mem := newWatchMemory(len(o.Nodes), now)
	for {
		rep := checkMasters(ctx, o, mem)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case o.JSON:
			if err := json.NewEncoder(w).Encode(rep); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
		default:
			if term {
				fmt.Fprint(w, clearScreen)
			}
			fmt.Fprintf(w, "every %v, %s (Ctrl-C to stop)\n", o.Watch, now().Format("15:04:05"))
			printStatus(w, rep, o)
			if !term {
				fmt.Fprintln(w)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}

// watchMemory is what status --watch carries from one round to the next:
// each master's evicted_keys (each shard's, on a Redis Cluster master), as
// the engine keeps them from one read to the next. A master whose count
// moved between two reads of one process dropped keys, a held lock's maybe
// among them, though no read saw an evicting policy (switched to one and
// back in between): the engine counts no vote from it then, and with the
// quarantine on keeps it out for a period (actors/quarantine.go, unsafeOf).
// It keeps a master out so after it was last seen unsafe for any reason (an
// evicting policy, a replica), since it may have dropped keys meanwhile, so
// the memory holds when a round last saw each process unsafe too; and for a
// period after a read found another run id behind the address, whatever the
// new process's uptime, so it holds each master's run id and when a round
// last found it changed. A single report reads each master once and cannot
// see any of these.
type watchMemory struct {
	masters []*masterMemory // as o.Nodes
}

// masterMemory is one master's share of watchMemory, touched only by the
// check of that master.
type masterMemory struct {
	now func() time.Time
	processMemory
	shards map[string]*processMemory // a cluster master's, by shard address
}

func newWatchMemory(n int, now func() time.Time) *watchMemory {
	m := &watchMemory{masters: make([]*masterMemory, n)}
	for i := range m.masters {
		m.masters[i] = &masterMemory{now: now, shards: map[string]*processMemory{}}
	}
	return m
}

// master is master i's memory; nil (nothing remembered) for a single
// report.
func (m *watchMemory) master(i int) *masterMemory {
	if m == nil {
		return nil
	}
	return m.masters[i]
}

func (m *masterMemory) shard(addr string) *processMemory {
	c := m.shards[addr]
	if c == nil {
		c = &processMemory{}
		m.shards[addr] = c
	}
	return c
}

// processMemory is what the rounds found of the process behind a master
// (or a shard): its evicted_keys as the last round that read it found them,
// why and when a round last saw it unsafe, and which process it replaced
// and when a round found that.
type processMemory struct {
	runID   string
	evicted uint64
	seen    string    // why a round last saw it unsafe, "" if none did
	seenAt  time.Time // that round's time
	// replaced is the run id that a round found runID behind the address
	// instead of ("" if none did: the first process the rounds read), at
	// replacedAt.
	replaced   string
	replacedAt time.Time
}

// observe records the info that a round at time at read, and returns why
// the engine would not count the master's vote for a count that moved since
// the last round that read the same process, or "" if it did not move, and
// the same in short, as the quarantine that follows names it (saw). A
// decrease counts too: CONFIG RESETSTAT zeroes the count, which hides the
// evictions since. The first count read, or another process's (a restart,
// another server behind the address), says nothing of keys dropped: as in
// the engine, a restart is the restart quarantine's business, so the last
// time the old process was seen unsafe is forgotten too, and another process
// than the one a round read before is kept out for a period from this round
// (keptOut), whatever its uptime, as the engine does from the read that
// found it (actors/quarantine.go, startOf): a process up for long may never
// have held our keys. The first process read has none to compare with, and
// is trusted by its uptime, as by a fresh engine.
func (c *processMemory) observe(info transport.ServerInfo, at time.Time) (why, short string) {
	var moved string
	switch {
	case c.runID == "" || info.RunID != c.runID:
		c.seen, c.seenAt = "", time.Time{}
		if c.runID != "" {
			c.replaced, c.replacedAt = c.runID, at
		}
	case info.Evicted > c.evicted:
		moved = fmt.Sprintf("rose from %d to %d", c.evicted, info.Evicted)
		why = "it dropped keys, a held lock's maybe among them"
	case info.Evicted < c.evicted:
		moved = fmt.Sprintf("went down from %d to %d", c.evicted, info.Evicted)
		why = "a reset (CONFIG RESETSTAT) hides any keys dropped since, a held lock's maybe among them"
	}
	c.runID, c.evicted = info.RunID, info.Evicted
	if why == "" {
		return "", ""
	}
	return "evicted_keys " + moved + " since the last round that read it: " + why + "; the engine would not count its vote (keep maxmemory-policy noeviction)", "evicted_keys " + moved
}

// saw records that a round at time at saw the process unsafe, why (short);
// "" (safe) leaves the last such round remembered.
func (c *processMemory) saw(why string, at time.Time) {
	if why != "" {
		c.seen, c.seenAt = why, at
	}
}

// keptOut is how much longer, at now, the engine keeps the master out since
// a round last saw it unsafe, or since a round found another process behind
// it than the one before, and why, as the engine says it; 0 once period (the
// quarantine) has passed since that round, or with the quarantine off: the
// engine then counts the vote again at the next read that finds it safe,
// and so does the next round. uptimeLeft is the quarantine its uptime gives
// it (period less its uptime, or 0): the time it votes again, as said, is
// the later of both.
func (c *processMemory) keptOut(period, uptimeLeft time.Duration, now time.Time) (left time.Duration, why string) {
	if period == 0 {
		return 0, ""
	}
	// A round that saw it unsafe is never before the one that found its
	// process, which forgets the old process's (observe): the later says
	// why, as the engine's quarantine since the later read.
	switch {
	case c.seen != "":
		ago := now.Sub(c.seenAt)
		if left = period - ago; left <= 0 {
			return 0, ""
		}
		left = max(left, uptimeLeft)
		return left, fmt.Sprintf("kept out for --quarantine %v after it was last seen unsafe, %v ago (%s); votes again in %v", period, ago.Round(time.Millisecond), c.seen, left.Round(time.Millisecond))
	case c.replaced != "":
		ago := now.Sub(c.replacedAt)
		if left = period - ago; left <= 0 {
			return 0, ""
		}
		left = max(left, uptimeLeft)
		return left, fmt.Sprintf("kept out for --quarantine %v after a round found another process behind it, %v ago (run_id %s, was %s: restarted, or another server now behind the address, whatever its uptime); votes again in %v", period, ago.Round(time.Millisecond), shortID(c.runID), shortID(c.replaced), left.Round(time.Millisecond))
	}
	return 0, ""
}

// shortID is a run id as the table shows it: its first 12 characters.
func shortID(runID string) string {
	if len(runID) > 12 {
		return runID[:12]
	}
	return runID
}
