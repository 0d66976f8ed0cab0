package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
)

// watchLoop is a status --watch loop run in-process, one round per tick
// from the test, on a clock the test moves.
type watchLoop struct {
	tick   chan time.Time
	out    *bufio.Reader
	json   bool
	clock  atomic.Int64 // the loop's now, Unix nanoseconds
	cancel context.CancelFunc
	done   chan error
	first  bool // the round printed at start is not read yet
}

func startWatchLoop(t *testing.T, o statusOptions, start time.Time) *watchLoop {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	l := &watchLoop{tick: make(chan time.Time), out: bufio.NewReader(pr), json: o.JSON, cancel: cancel, done: make(chan error, 1), first: true}
	l.clock.Store(start.UnixNano())
	go func() {
		err := watchRounds(ctx, pw, o, l.tick, func() time.Time { return time.Unix(0, l.clock.Load()) })
		pw.Close()
		l.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		pr.Close() // a loop stopped mid-round by a failed test
		if err := <-l.done; err != nil && !t.Failed() {
			t.Errorf("the watch loop ended with %v, want nil", err)
		}
	})
	return l
}

// round moves the clock by d, runs a round (the first one runs at start)
// and returns what it printed: one JSON line, or a table up to its quorum
// line and the blank line after it.
func (l *watchLoop) round(t *testing.T, d time.Duration) string {
	t.Helper()
	l.clock.Add(int64(d))
	if !l.first {
		l.tick <- time.Time{}
	}
	l.first = false
	var b strings.Builder
	for {
		line, err := l.out.ReadString('\n')
		if err != nil {
			t.Fatalf("reading a round: %v (read %q)", err, b.String()+line)
		}
		b.WriteString(line)
		if l.json {
			return b.String()
		}
		if strings.HasPrefix(line, "quorum: ") {
			if blank, err := l.out.ReadString('\n'); err != nil || blank != "\n" {
				t.Fatalf("after the quorum line: %q, %v; want a blank line", blank, err)
			}
			return b.String()
		}
	}
}

// watchPair runs one table loop and one --json loop side by side, so that
// each change of the masters between rounds is seen by both.
type watchPair struct{ table, json *watchLoop }

// untilVoting runs rounds until ok says the masters vote, and returns the
// last: fresh servers sit out the restart quarantine until their uptime,
// which INFO gives in whole seconds, passes it, so this polls real time.
func (w *watchPair) untilVoting(t *testing.T, ok func(statusReport) bool) statusReport {
	t.Helper()
	rep, _ := w.round(t, 0)
	for deadline := time.Now().Add(30 * time.Second); !ok(rep); {
		if time.Now().After(deadline) {
			t.Fatalf("masters still in restart quarantine: %+v", rep)
		}
		time.Sleep(100 * time.Millisecond)
		rep, _ = w.round(t, 0)
	}
	return rep
}

// allVote says whether every master of rep votes.
func allVote(rep statusReport) bool {
	for _, m := range rep.Masters {
		if !m.Votes {
			return false
		}
	}
	return true
}

func startWatchPair(t *testing.T, nodes string, quarantine time.Duration, start time.Time) *watchPair {
	t.Helper()
	o := defaultStatusOptions()
	o.Nodes, o.Quarantine, o.Watch = splitNodes(nodes), quarantine, time.Hour
	p := &watchPair{table: startWatchLoop(t, o, start)}
	o.JSON = true
	p.json = startWatchLoop(t, o, start)
	return p
}

// round runs a round of both loops after moving their clocks by d.
func (p *watchPair) round(t *testing.T, d time.Duration) (statusReport, string) {
	t.Helper()
	table := p.table.round(t, d)
	rep := decodeStatus(t, p.json.round(t, d))
	t.Logf("round:\n%s", table)
	return rep, table
}

// row is the line of table that starts with addr.
func row(t *testing.T, table, addr string) string {
	t.Helper()
	for l := range strings.Lines(table) {
		if strings.HasPrefix(strings.TrimSpace(l), addr) {
			return l
		}
	}
	t.Fatalf("no row for %s in\n%s", addr, table)
	return ""
}

// evictAll writes keys to s (those of its own slots, on a cluster node)
// and makes s evict them all and go back to keeping its keys. The test
// runs no round meanwhile, so no round sees the evicting policy, only
// evicted_keys moved: the flip the engine catches by the count. It returns
// s's evicted_keys then.
func evictAll(t *testing.T, s *redistest.Server) uint64 {
	t.Helper()
	written := 0
	for i := range 32 {
		err := s.TryDo(nil, "SET", fmt.Sprintf("evict-me:%d", i), "v")
		if err != nil && !strings.Contains(err.Error(), "MOVED") {
			t.Fatal(err)
		}
		if err == nil {
			written++
		}
	}
	if written == 0 {
		t.Fatalf("%s took none of 32 keys", s.Addr)
	}
	for _, kv := range [][2]string{{"maxmemory-policy", "allkeys-lru"}, {"maxmemory", "1"}, {"maxmemory", "0"}, {"maxmemory-policy", "noeviction"}} {
		s.Do(t, nil, "CONFIG", "SET", kv[0], kv[1])
	}
	if n := s.DBSize(t); n != 0 {
		t.Fatalf("%s kept %d keys under maxmemory 1 and allkeys-lru", s.Addr, n)
	}
	n, err := strconv.ParseUint(s.Info(t, "stats", "evicted_keys"), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("%s: evicted_keys %d, %v; want the keys it dropped", s.Addr, n, err)
	}
	return n
}

// TestStatusWatchEvictedKeys: the engine refuses a master whose
// evicted_keys moved between two of its reads of one process, though no
// read saw an evicting policy: it dropped keys, maybe a held lock's. status
// --watch reads each master every round and must judge it as the engine
// does: not voting in the round that finds the count moved, naming
// evicted_keys, in the table and in --json; with the quarantine off, voting
// again in the next round that finds it unchanged; a decrease (CONFIG
// RESETSTAT) counts too; a restart (another run id) starts the comparison
// afresh.
func TestStatusWatchEvictedKeys(t *testing.T) {
	servers, nodes := startMasters(t, 3)
	w := startWatchPair(t, nodes, 0, time.Now())
	s := servers[0]
	// votes checks s's vote in a round: refused, with reason in --json and
	// in its row, or counted, with nothing said against it.
	votes := func(t *testing.T, rep statusReport, table string, reason string) {
		t.Helper()
		m, r := rep.Masters[0], row(t, table, s.Addr)
		voters := "2 of 3"
		if reason == "" {
			voters = "3 of 3"
			if !m.Votes || m.Unsafe != "" || m.Error != "" || !strings.HasSuffix(strings.TrimSpace(r), " no") {
				t.Errorf("%s: --json votes %v, unsafe %q, error %q; row %q: want it voting, nothing said against it", m.Addr, m.Votes, m.Unsafe, m.Error, r)
			}
		} else if m.Votes || !strings.Contains(m.Unsafe, reason) || !strings.Contains(m.Error, reason) || !strings.Contains(r, reason) {
			t.Errorf("%s: --json votes %v, unsafe %q, error %q; row %q: want it not voting, %q in unsafe, error and row", m.Addr, m.Votes, m.Unsafe, m.Error, r, reason)
		}
		if !strings.Contains(table, "quorum: healthy: "+voters+" masters can vote") {
			t.Errorf("table: want %s masters voting:\n%s", voters, table)
		}
	}

	rep, table := w.round(t, 0)
	votes(t, rep, table, "")
	n := evictAll(t, s)
	rep, table = w.round(t, time.Second)
	votes(t, rep, table, fmt.Sprintf("evicted_keys rose from 0 to %d since the last round", n))
	// The quarantine is off: as the engine, the next read that finds the
	// count unchanged counts the vote again.
	rep, table = w.round(t, time.Second)
	votes(t, rep, table, "")

	s.Do(t, nil, "CONFIG", "RESETSTAT")
	rep, table = w.round(t, time.Second)
	votes(t, rep, table, fmt.Sprintf("evicted_keys went down from %d to 0 since the last round", n))

	n = evictAll(t, s)
	rep, table = w.round(t, time.Second)
	votes(t, rep, table, fmt.Sprintf("evicted_keys rose from 0 to %d since the last round", n))
	// The new process's 0 is its own count, not a drop from the old one's.
	old := rep.Masters[0].RunID
	s.Restart(t)
	rep, table = w.round(t, time.Second)
	if rep.Masters[0].RunID == old {
		t.Fatalf("run id %s after a restart, as before", old)
	}
	votes(t, rep, table, "")
}

// TestStatusWatchEvictedKeysQuarantine: with the quarantine on, the engine
// keeps a master whose evicted_keys moved out for a quarantine period from
// the read that saw it move, though later reads find the count unchanged:
// it may lack keys of locks still valid, as a restarted master does. status
// --watch shows it in quarantine for that period, saying why, and voting
// once the period is over.
func TestStatusWatchEvictedKeysQuarantine(t *testing.T) {
	const q = time.Second
	servers, nodes := startMasters(t, 3)
	s := servers[0]
	w := startWatchPair(t, nodes, q, time.Now())
	// Fresh masters are in restart quarantine: wait until their uptime
	// ends it, round after round.
	rep := w.untilVoting(t, allVote)

	n := evictAll(t, s)
	moved := fmt.Sprintf("evicted_keys rose from 0 to %d", n)
	rep, table := w.round(t, 0)
	m := rep.Masters[0]
	if m.Votes || !m.Quarantined || !strings.Contains(m.Unsafe, moved) {
		t.Errorf("--json: the round that saw the count move: %+v; want it unsafe, naming %q, and in quarantine", m, moved)
	}
	if r := row(t, table, s.Addr); !strings.Contains(r, moved) || !strings.Contains(r, "yes, votes in 1s") {
		t.Errorf("table: the round that saw the count move: %q; want %q and its quarantine of 1s", r, moved)
	}

	quarantineRunsOut(t, w, s.Addr, []string{moved})
}

// TestStatusWatchEvictedKeysShard: the engine compares each shard's
// evicted_keys of a Redis Cluster master on its own, and keeps a shard that
// dropped keys out for a quarantine period; status --watch shows that
// shard, and so the cluster, as not voting, then in quarantine, saying why,
// and the cluster voting once the period is over.
func TestStatusWatchEvictedKeysShard(t *testing.T) {
	const q = time.Second
	c := redistest.StartCluster(t, 2)
	w := startWatchPair(t, "redis+cluster://"+c[0].Addr+";"+c[1].Addr, q, time.Now())
	// Fresh shards are in restart quarantine: wait until their uptime ends
	// it, round after round.
	rep := w.untilVoting(t, func(rep statusReport) bool { return rep.Healthy })

	n := evictAll(t, c[0])
	moved := fmt.Sprintf("evicted_keys rose from 0 to %d", n)
	rep, table := w.round(t, 0)
	m := rep.Masters[0]
	if m.Votes || !strings.Contains(m.Unsafe, "shard "+c[0].Addr) || !strings.Contains(m.Unsafe, moved+" since the last round") {
		t.Errorf("--json: the cluster: votes %v, unsafe %q; want it not voting for shard %s, naming %q", m.Votes, m.Unsafe, c[0].Addr, moved)
	}
	for _, s := range m.Shards {
		// The other shard is not probed once one is unsafe, so its vote
		// is not asserted, only that it is not blamed.
		dropped := s.Addr == c[0].Addr
		if (dropped && (s.Votes || !s.Quarantined)) || strings.Contains(s.Unsafe, moved) != dropped {
			t.Errorf("--json: shard %s: votes %v, quarantined %v, unsafe %q; want the shard that dropped keys alone unsafe, naming %q, and in quarantine", s.Addr, s.Votes, s.Quarantined, s.Unsafe, moved)
		}
	}
	if r := row(t, table, "shard "+c[0].Addr); !strings.Contains(r, moved) || !strings.Contains(r, "quarantined yes, votes in 1s") {
		t.Errorf("table: %q; want %q and its quarantine of 1s", r, moved)
	}
	if !strings.Contains(table, "quorum: NOT healthy: 0 of 1 masters can vote") {
		t.Errorf("table: want the cluster not voting:\n%s", table)
	}

	shardQuarantineRunsOut(t, w, c[0].Addr, []string{moved})
}

// TestStatusWatchUnsafeQuarantine: with the quarantine on, the engine keeps
// a master out for a quarantine period after it was last seen unsafe (here
// an evicting policy under a memory limit), though it is safe again: it may
// have dropped a held lock's key meanwhile. status --watch shows it in
// quarantine for that period from the last round that saw it unsafe, saying
// why, and voting once the period is over.
func TestStatusWatchUnsafeQuarantine(t *testing.T) {
	const q = time.Second
	servers, nodes := startMasters(t, 3)
	s := servers[0]
	w := startWatchPair(t, nodes, q, time.Now())
	// Fresh masters are in restart quarantine: wait until their uptime
	// ends it, round after round.
	rep := w.untilVoting(t, allVote)

	s.Do(t, nil, "CONFIG", "SET", "maxmemory", "1gb")
	s.Do(t, nil, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
	const policy = "maxmemory-policy allkeys-lru"
	rep, _ = w.round(t, 0)
	if m := rep.Masters[0]; m.Votes || !strings.Contains(m.Unsafe, policy) {
		t.Fatalf("--json: the round that saw the evicting policy: %+v; want it unsafe, naming %q", m, policy)
	}

	s.Do(t, nil, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	rep, table := w.round(t, 400*time.Millisecond)
	m := rep.Masters[0]
	if m.Votes || !m.Quarantined || m.Unsafe != "" || !strings.Contains(m.Error, "after it was last seen unsafe, 400ms ago") || !strings.Contains(m.Error, policy) {
		t.Errorf("--json: a round 400ms later, the policy fixed: %+v; want it in quarantine, not unsafe, its error saying it was last seen unsafe 400ms ago, naming %q", m, policy)
	}
	if r := row(t, table, s.Addr); !strings.Contains(r, policy) || !strings.Contains(r, "yes, votes in 600ms") || !strings.Contains(r, "votes again in 600ms") {
		t.Errorf("table: a round 400ms later: %q; want %q and 600ms of quarantine left", r, policy)
	}
	if !strings.Contains(table, "quorum: healthy: 2 of 3 masters can vote") {
		t.Errorf("a round 400ms later, want 2 of 3 masters voting:\n%s", table)
	}

	rep, table = w.round(t, 600*time.Millisecond)
	if m = rep.Masters[0]; !m.Votes || m.Quarantined || m.Error != "" {
		t.Errorf("--json: a period after it was last seen unsafe: %+v; want it voting", m)
	}
	if !strings.Contains(table, "quorum: healthy: 3 of 3 masters can vote") {
		t.Errorf("a period after it was last seen unsafe, want 3 of 3 masters voting:\n%s", table)
	}
}

// upFor waits until s has been up for at least d as status reads it: its
// INFO's uptime_in_seconds less a second (transport/redis, ServerInfo). It
// reads s directly: a round of status --watch meanwhile would see its new
// run id before the test means it to.
func upFor(t *testing.T, s *redistest.Server, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		secs, err := strconv.ParseInt(s.Info(t, "server", "uptime_in_seconds"), 10, 64)
		if err != nil {
			t.Fatalf("%s: uptime_in_seconds: %v", s.Addr, err)
		}
		if time.Duration(secs-1)*time.Second >= d {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: uptime_in_seconds %d, want %v more than a second", s.Addr, secs, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restartedMsg is what the error of a master (a shard) kept out after a
// round found another process behind it says, at a round ago after that
// one, with left of its quarantine to go.
func restartedMsg(ago, left string) []string {
	return []string{"after a round found another process behind it, " + ago + " ago", "votes again in " + left}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestStatusWatchRestartQuarantine: when the run id behind an address
// changes (a restart, or another server behind it), the engine keeps the
// master out for a quarantine period from the read that saw the change,
// whatever the new process's uptime: a process up for long may never have
// held our keys (actors/quarantine.go, startOf). status --watch shows it in
// quarantine for that period from the round that saw the new run id,
// saying why, though its uptime is past --quarantine, and voting once the
// period is over.
func TestStatusWatchRestartQuarantine(t *testing.T) {
	const q = time.Second
	servers, nodes := startMasters(t, 3)
	s := servers[0]
	w := startWatchPair(t, nodes, q, time.Now())
	// Fresh masters are in restart quarantine: wait until their uptime
	// ends it, round after round.
	rep := w.untilVoting(t, allVote)
	old := rep.Masters[0].RunID

	// No round meanwhile: the next one is the first to see the new
	// process, already up for the quarantine period.
	s.Restart(t)
	upFor(t, s, q)
	rep, table := w.round(t, 0)
	m := rep.Masters[0]
	if m.RunID == old {
		t.Fatalf("run id %s after a restart, as before", old)
	}
	if m.Votes || !m.Quarantined || m.Unsafe != "" || !containsAll(m.Error, restartedMsg("0s", "1s")) {
		t.Errorf("--json: the round that found another run id, the new process up for %v: %+v; want it in quarantine, not unsafe, its error saying %q", q, m, restartedMsg("0s", "1s"))
	}
	if r := row(t, table, s.Addr); !strings.Contains(r, "yes, votes in 1s") || !containsAll(r, restartedMsg("0s", "1s")) {
		t.Errorf("table: the round that found another run id: %q; want a quarantine of 1s, and why", r)
	}
	if !rep.Healthy || !strings.Contains(table, "quorum: healthy: 2 of 3 masters can vote") {
		t.Errorf("the round that found another run id, want 2 of 3 masters voting:\n%s", table)
	}

	quarantineRunsOut(t, w, s.Addr, restartedMsg("600ms", "400ms"))
}

// TestStatusWatchRestartQuarantineShard: the engine quarantines each shard
// of a Redis Cluster master on its own, for a period from the read that
// found another run id behind it, whatever its uptime
// (actors/shardquarantine.go); status --watch shows that shard, and so the
// cluster, in quarantine for that period, saying why, and the cluster
// voting once it is over.
func TestStatusWatchRestartQuarantineShard(t *testing.T) {
	const q = time.Second
	c := redistest.StartCluster(t, 2)
	w := startWatchPair(t, "redis+cluster://"+c[0].Addr+";"+c[1].Addr, q, time.Now())
	w.untilVoting(t, func(rep statusReport) bool { return rep.Healthy })

	c[1].Restart(t)
	if err := redisproc.WaitClusterOK(context.Background(), []*redisproc.Server{c[0].Server, c[1].Server}); err != nil {
		t.Fatal(err)
	}
	upFor(t, c[1], q)
	rep, table := w.round(t, 0)
	m := rep.Masters[0]
	if m.Votes || !m.Quarantined || !strings.Contains(m.Error, "shard "+c[1].Addr) || !containsAll(m.Error, restartedMsg("0s", "1s")) {
		t.Errorf("--json: the cluster, in the round that found another run id behind shard %s: %+v; want it in quarantine, its error naming the shard and saying %q", c[1].Addr, m, restartedMsg("0s", "1s"))
	}
	for _, s := range m.Shards {
		restarted := s.Addr == c[1].Addr
		if s.Quarantined != restarted || (restarted && (s.Votes || !containsAll(s.Error, restartedMsg("0s", "1s")))) {
			t.Errorf("--json: shard %s: votes %v, quarantined %v, error %q; want the restarted shard alone in quarantine, saying why", s.Addr, s.Votes, s.Quarantined, s.Error)
		}
	}
	if r := row(t, table, "shard "+c[1].Addr); !strings.Contains(r, "quarantined yes, votes in 1s") {
		t.Errorf("table: %q; want a quarantine of 1s", r)
	}
	if !strings.Contains(table, "no vote for the keys of 8192 of 16384 slots") || !strings.Contains(table, "quorum: NOT healthy: 0 of 1 masters can vote") {
		t.Errorf("table: want the cluster not voting for the restarted shard's slots:\n%s", table)
	}

	shardQuarantineRunsOut(t, w, c[1].Addr, restartedMsg("600ms", "400ms"))
}

// quarantineRunsOut runs the two rounds after one that put master addr,
// the first of three, in a quarantine of 1s: 600ms later it is still out,
// not unsafe, its error and row saying why, with 400ms left and the other
// two voting; 400ms after that it votes again, and so do all three.
func quarantineRunsOut(t *testing.T, w *watchPair, addr string, why []string) {
	t.Helper()
	rep, table := w.round(t, 600*time.Millisecond)
	if m := rep.Masters[0]; m.Votes || !m.Quarantined || m.Unsafe != "" || !containsAll(m.Error, why) {
		t.Errorf("--json: a round 600ms later: %+v; want it in quarantine, not unsafe, its error saying %q", m, why)
	}
	if r := row(t, table, addr); !containsAll(r, why) || !strings.Contains(r, "yes, votes in 400ms") {
		t.Errorf("table: a round 600ms later: %q; want %q and 400ms of quarantine left", r, why)
	}
	if !rep.Healthy || !strings.Contains(table, "quorum: healthy: 2 of 3 masters can vote") {
		t.Errorf("a round 600ms later, want 2 of 3 masters voting:\n%s", table)
	}

	rep, table = w.round(t, 400*time.Millisecond)
	if m := rep.Masters[0]; !m.Votes || m.Quarantined || m.Error != "" {
		t.Errorf("--json: a period after the round that put it in quarantine: %+v; want it voting", m)
	}
	if !strings.Contains(table, "quorum: healthy: 3 of 3 masters can vote") {
		t.Errorf("a period after the round that put it in quarantine, want 3 of 3 masters voting:\n%s", table)
	}
}

// shardQuarantineRunsOut is quarantineRunsOut for shard addr of a 2-shard
// cluster, the only master: 600ms later the cluster is still out for it,
// not unsafe, its error naming the shard and why, the shard's row with
// 400ms left, half the slots without a vote; 400ms after that the cluster
// votes again.
func shardQuarantineRunsOut(t *testing.T, w *watchPair, addr string, why []string) {
	t.Helper()
	rep, table := w.round(t, 600*time.Millisecond)
	if m := rep.Masters[0]; m.Votes || !m.Quarantined || m.Unsafe != "" || !strings.Contains(m.Error, "shard "+addr) || !containsAll(m.Error, why) {
		t.Errorf("--json: the cluster 600ms later: %+v; want it in quarantine, not unsafe, its error naming shard %s and saying %q", m, addr, why)
	}
	if r := row(t, table, "shard "+addr); !containsAll(r, why) || !strings.Contains(r, "quarantined yes, votes in 400ms") {
		t.Errorf("table: 600ms later: %q; want %q and 400ms of quarantine left", r, why)
	}
	if !strings.Contains(table, "no vote for the keys of 8192 of 16384 slots") {
		t.Errorf("table: want the cluster saying which slots it does not vote for:\n%s", table)
	}

	rep, table = w.round(t, 400*time.Millisecond)
	if !rep.Healthy || !strings.Contains(table, "quorum: healthy: 1 of 1 masters can vote") {
		t.Errorf("a period after the round that put the shard in quarantine: %+v; want the cluster voting again:\n%s", rep.Masters[0], table)
	}
}
