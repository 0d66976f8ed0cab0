package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// shards is the restart quarantine of a master that is several servers
// (transport.ShardReporter: the shards of a Redis Cluster), kept per shard:
// each shard is a failure domain of its own. A shard that restarted empty
// has forgotten the keys of its slots, and only those: so its grants do not
// count until it has been up for the period, while the master's other
// shards go on voting for theirs.
//
// The rules are the single server's (see quarantine), applied to the shard
// that served each op, in the epoch of that shard that served it: the
// transport reports both per op (Served), after any redirect, so an op that
// MOVED or ASK sent to another shard is vetted by that shard. A grant
// counts only if its shard was read in that very epoch and was past its
// period; any other grant becomes an ErrQuarantined failure. Shards are
// known by name (address) for the transport's life: one that leaves the
// slot map and comes back is still compared with the run id it had.
//
// Keys travel between shards (resharding), and so does a loss: a shard
// that restarted empty and then hands a slot to another (a new slot map,
// or MOVED or ASK sent on) hands over keys it no longer has, and the
// shard that takes the slot, past its own period, would grant them. The
// transport counts each shard's hand-offs (transport.ShardReporter's
// Handoffs) before the other shard can serve what was handed over, and a
// hand-off counts as accounted for once a read of the shard's run id,
// started after it, found the process the engine knew (no restart, so no
// loss, came before it). A batch that returns while a shard has hand-offs
// not accounted for waits for such a read (its grants may be for keys that
// shard handed over); if the read finds a restart, or the shard is in
// quarantine when it hands over, the whole master is quarantined until that
// shard's period ends (taint). A shard first read while young may have
// handed its slots over before we knew it: that taints the master too, as
// one server's first read would quarantine it.
//
// Everything here runs on the node actor, but for the reads themselves.
type shards struct {
	r     transport.ShardReporter
	known map[string]*shardProc
	// current is ShardNames as last read (on every check tick): the
	// shards that the metrics and the twins check describe.
	current []string
	// waits: for each parked batch, the reads it waits for; needs: the
	// hand-offs that must be accounted for before its grants count.
	waits map[*batch][]shardWait
	needs map[*batch][]handoffNeed
	// taint: no grant of the master counts before it (see above).
	taint time.Time
}

// shardProc is what the quarantine knows of the process behind one shard.
type shardProc struct {
	vetted   bool
	vettedAt uint64
	started  time.Time
	runID    string
	evicted  uint64 // the evicted count of the process runID, as last read
	readErr  error  // the last read's error, nil once one succeeds
	unsafe   error  // why the shard's configuration keeps it from voting (unsafeOf), nil if nothing does
	// seenUnsafe is why the shard was last seen unsafe, at started (as
	// quarantine.seenUnsafe).
	seenUnsafe error
	fetching   bool
	gen        uint64 // counts reads started
	name       string
	// handoffs is the shard's Handoffs count that is accounted for: no
	// hand-off up to it can have carried a loss unseen (never decreases).
	handoffs uint64
	// fetchHandoffs: Handoffs as read before the read out now; reread: a
	// count that the read out now does not cover, for which another read
	// must follow it.
	fetchHandoffs, reread uint64
	// pending is a count not accounted for, first seen at pendingAt: once
	// a period has passed since, every key it may have carried a loss of
	// has expired, so it is accounted for even if the shard is gone for
	// good (its slots moved away before it was shut down).
	pending   uint64
	pendingAt time.Time
}

type handoffNeed struct {
	shard string
	count uint64
}

type shardWait struct {
	shard string
	gen   uint64
}

func newShards(r transport.ShardReporter) *shards {
	return &shards{r: r, known: map[string]*shardProc{}, waits: map[*batch][]shardWait{}, needs: map[*batch][]handoffNeed{}}
}

func (s *shards) proc(name string) *shardProc {
	p := s.known[name]
	if p == nil {
		p = &shardProc{name: name}
		s.known[name] = p
	}
	return p
}

// do sends b through the transport (see node.do), recording who served
// each op when the quarantine is per shard.
func (q *quarantine) do(ctx context.Context, t transport.Transport, b *batch) error {
	if q == nil || q.shards == nil {
		return t.Do(ctx, b.ops, b.res)
	}
	return q.shards.do(ctx, b)
}

func (s *shards) do(ctx context.Context, b *batch) error {
	if cap(b.served) < len(b.ops) {
		b.served = make([]transport.Served, len(b.ops))
	}
	b.served = b.served[:len(b.ops)]
	clear(b.served)
	return s.r.DoServed(ctx, b.ops, b.res, b.served)
}

// checkAll reads every shard of the current map, so that a shard is known
// before it serves (no batch waits for its first read) and a restart is
// found within an interval even on a shard that serves nothing.
func (s *shards) checkAll(q *quarantine, n *node) {
	s.current = s.r.ShardNames()
	for _, name := range s.current {
		s.check(q, n, name)
	}
}

// check reads one shard's info off the actor's goroutine, unless a read is
// out already.
func (s *shards) check(q *quarantine, n *node, name string) {
	p := s.proc(name)
	if p.fetching {
		return
	}
	p.fetching = true
	p.gen++
	gen := p.gen
	// Hand-offs are read here, before the read starts: all of them up to
	// this count happened before the process the read finds.
	p.fetchHandoffs = s.r.Handoffs(name)
	handoffs := p.fetchHandoffs
	q.read(n, &infoResult{shard: name, gen: gen, handoffs: handoffs}, func(ctx context.Context, r *infoResult) {
		// The epoch first: the info then describes that epoch's process
		// or a later one, never an earlier one.
		r.epoch = s.r.ShardEpoch(name)
		r.info, r.err = s.r.ShardInfo(ctx, name)
	})
}

func (s *shards) learn(q *quarantine, n *node, r *infoResult) {
	p := s.proc(r.shard)
	p.fetching = false
	if r.err != nil {
		// Unknown is not trusted: a shard we cannot read does not vote,
		// nor is what it handed over accounted for (the batches waiting
		// for that fail; no read again at once, which would spin while
		// the shard is down).
		p.vetted, p.readErr, p.reread = false, r.err, 0
	} else {
		started, another := startOf(p.runID, p.started, r)
		ends := started.Add(q.period)
		switch {
		case p.runID == "":
			p.handoffs = max(p.handoffs, r.handoffs)
			if r.at.Before(ends) {
				s.taintUntil(q, ends, r.shard, "first read while in quarantine")
			}
		case another:
			// Whatever left the shard since the read that last saw the
			// old process may have left after the restart.
			if h := s.r.Handoffs(r.shard); h != p.handoffs {
				s.taintUntil(q, ends, r.shard, "handed keys over around its restart")
				p.handoffs = max(p.handoffs, h)
			}
		default:
			// The same process as before: what it handed over until the
			// read began carried no loss unseen, unless it was (and is)
			// in quarantine.
			if r.handoffs > p.handoffs && r.at.Before(ends) {
				s.taintUntil(q, ends, r.shard, "handed keys over while in quarantine")
			}
			p.handoffs = max(p.handoffs, r.handoffs)
		}
		u := unsafeOf(r.info, p.runID, p.evicted)
		if u != nil && p.unsafe == nil {
			q.logger.Error("redlock: a shard of this master does not vote: its configuration can drop lock keys, or it dropped some", "master", q.name, "shard", r.shard, "error", u)
		}
		if p.unsafe = u; u != nil {
			// As for a whole master (quarantine.learn): a period from
			// the last time it was seen unsafe.
			started = r.at
			p.seenUnsafe = u
		} else if another {
			p.seenUnsafe = nil
		}
		if another && q.period > 0 {
			q.logger.Warn("redlock: another process behind a shard of this master (restarted, or the address now reaches a different server); the shard is in quarantine", "master", q.name, "shard", r.shard,
				"old_run_id", p.runID, "run_id", r.info.RunID, "uptime", r.info.Uptime,
				"votes_again_in", time.Until(started.Add(q.period)).Round(time.Millisecond))
		}
		p.runID, p.started, p.evicted, p.readErr = r.info.RunID, started, r.info.Evicted, nil
		if s.r.ShardEpoch(r.shard) != r.epoch {
			// Reconnected while reading: the reply vouches for no epoch.
			p.vetted = false
			s.check(q, n, r.shard)
		} else {
			p.vettedAt, p.vetted = r.epoch, true
		}
		if p.reread > p.handoffs {
			s.check(q, n, r.shard)
		}
		p.reread = 0
	}
	s.report(q, n)
	s.release(q, n)
}

// taintUntil keeps the whole master from voting until end.
func (s *shards) taintUntil(q *quarantine, end time.Time, shard, why string) {
	if end.After(s.taint) {
		s.taint = end
		q.logger.Warn("redlock: a shard in restart quarantine may have handed its keys to another shard (resharding); the whole master is in quarantine", "master", q.name, "shard", shard, "reason", why,
			"votes_again_in", time.Until(end).Round(time.Millisecond))
	}
}

// handoffs returns the reads that batch b must wait for because of
// hand-offs not accounted for (see shards), starting them, and records in
// needs what they must account for. A shard in quarantine that handed over
// taints the master at once instead.
func (s *shards) handoffs(q *quarantine, n *node, b *batch, now time.Time) (waits []shardWait) {
	var needs []handoffNeed
	for _, p := range s.known {
		if p.runID == "" {
			continue // its first read covers it
		}
		h := s.r.Handoffs(p.name)
		if h == p.handoffs {
			continue
		}
		if p.pendingAt.IsZero() || p.pending <= p.handoffs {
			p.pending, p.pendingAt = h, now
		} else if now.Sub(p.pendingAt) >= q.period {
			p.handoffs = max(p.handoffs, p.pending)
			p.pending, p.pendingAt = h, now
			if h == p.handoffs {
				continue
			}
		}
		if end := p.started.Add(q.period); now.Before(end) {
			s.taintUntil(q, end, p.name, "handed keys over while in quarantine")
			p.handoffs = max(p.handoffs, h)
			continue
		}
		needs = append(needs, handoffNeed{p.name, h})
		switch {
		case !p.fetching:
			s.check(q, n, p.name)
			waits = append(waits, shardWait{p.name, p.gen})
		case p.fetchHandoffs >= h:
			waits = append(waits, shardWait{p.name, p.gen})
		default:
			// The read out now began before h: the next one covers it.
			p.reread = max(p.reread, h)
			waits = append(waits, shardWait{p.name, p.gen + 1})
		}
	}
	if needs != nil {
		s.needs[b] = needs
	}
	return waits
}

// report hands the metrics and the twins check the master as a whole: it
// is unreadable while any current shard is, and in quarantine until its
// last shard leaves it or the whole-master taint ends (the metrics carry no
// shard attribute, so that their cardinality stays the number of masters);
// its identity is the set of its shards' run ids, as the transport's own
// ServerInfo says.
func (s *shards) report(q *quarantine, n *node) {
	var ends time.Time
	ids := make([]string, 0, len(s.current))
	var err error
	complete, unsafe := true, false
	denied := true // every shard that could not be read refused the read (transport.ErrReply)
	for _, name := range s.current {
		p := s.known[name]
		unsafe = unsafe || p != nil && p.unsafe != nil
		switch {
		case p == nil || (p.runID == "" && p.readErr == nil):
			complete = false // its first read is still out
		case p.readErr != nil:
			err = errors.Join(err, fmt.Errorf("shard %s: %w", name, p.readErr))
			denied = denied && errors.Is(p.readErr, transport.ErrReply)
		default:
			ids = append(ids, p.runID)
			if e := p.started.Add(q.period); e.After(ends) {
				ends = e
			}
		}
	}
	if err == nil && (!complete || len(s.current) == 0) {
		return
	}
	if err != nil {
		n.m.unread(n.index, denied)
		q.twins.set(q.index, "")
		return
	}
	if s.taint.After(ends) {
		ends = s.taint
	}
	if q.period == 0 {
		ends = noQuarantineEnd // see quarantine.votesAt
	}
	n.m.learned(n.index, ends, unsafe) // a shard unsafe: part of the master does not vote
	slices.Sort(ids)
	q.twins.set(q.index, "cluster:"+strings.Join(ids, ","))
}

// park holds batch b while a read of a shard that served one of its
// answers, in an epoch not vetted yet, is out (starting that read): right
// after start or a shard's reconnect, reporting its grants as quarantined
// would fail locks for one round trip for nothing.
func (s *shards) park(q *quarantine, n *node, b *batch) bool {
	var waits []shardWait
	for i := range b.res {
		if countsAsVote(b, i, false) {
			waits = s.handoffs(q, n, b, time.Now())
			break
		}
	}
	for i := range b.served {
		sv := b.served[i]
		if sv.Shard == "" || sv.Epoch == transport.Unvetted || !countsAsVote(b, i, true) {
			continue
		}
		p := s.proc(sv.Shard)
		if p.vetted && p.vettedAt == sv.Epoch {
			continue
		}
		s.check(q, n, sv.Shard)
		if w := (shardWait{sv.Shard, p.gen}); !slices.Contains(waits, w) {
			waits = append(waits, w)
		}
	}
	if len(waits) == 0 {
		return false
	}
	s.waits[b] = waits
	q.parked = append(q.parked, b)
	return true
}

// release delivers the parked batches whose reads have all come back.
func (s *shards) release(q *quarantine, n *node) {
	keep := q.parked[:0]
	var ready []*batch
	for _, b := range q.parked {
		waits := s.waits[b]
		out := false
		for _, w := range waits {
			// Waiting on the read out now, or on the one to follow it.
			if p := s.known[w.shard]; p.fetching && p.gen <= w.gen {
				out = true
				break
			}
		}
		if out {
			keep = append(keep, b)
			continue
		}
		delete(s.waits, b)
		ready = append(ready, b)
	}
	clear(q.parked[len(keep):])
	q.parked = keep
	n.finishAll(ready)
}

// countsAsVote reports whether op i of b is an answer the quarantine must
// vet: a grant (or, with answers, any definite answer), not a release,
// which only ever helps.
func countsAsVote(b *batch, i int, answers bool) bool {
	k := b.ops[i].Kind
	return k != transport.Release && k != transport.ReleaseShared && (b.res[i].OK || (answers && b.res[i].Err == nil))
}

// vet turns each grant of b into an ErrQuarantined failure unless the
// shard that served it, in the epoch that served it, may vote; and, when
// the master is one server with another entry (twins), every answer.
func (s *shards) vet(q *quarantine, n *node, b *batch) {
	needs := s.needs[b]
	delete(s.needs, b)
	if reason := q.twins.err(q.index); reason != nil {
		for i := range b.res {
			if countsAsVote(b, i, true) {
				b.res[i] = transport.Result{Err: reason}
			}
		}
		return
	}
	now := time.Now()
	if now.Before(s.taint) {
		reason := fmt.Errorf("%w: a shard in quarantine may have handed its keys to another (resharding); the whole master votes again in %v", api.ErrQuarantined, s.taint.Sub(now).Round(time.Millisecond))
		for i := range b.res {
			if countsAsVote(b, i, false) {
				b.res[i] = transport.Result{Err: reason}
			}
		}
		return
	}
	for _, nd := range needs {
		if p := s.known[nd.shard]; p.handoffs < nd.count {
			reason := fmt.Errorf("%w: shard %s handed keys to another shard (resharding), and could not be read since to rule out that it had lost them", api.ErrQuarantined, nd.shard)
			for i := range b.res {
				if countsAsVote(b, i, false) {
					b.res[i] = transport.Result{Err: reason}
				}
			}
			return
		}
	}
	for i := range b.res {
		if !countsAsVote(b, i, false) {
			continue
		}
		var sv transport.Served
		if i < len(b.served) {
			sv = b.served[i]
		}
		p := s.known[sv.Shard]
		if sv.Shard == "" || sv.Epoch == transport.Unvetted || p == nil || !p.vetted || p.vettedAt != sv.Epoch {
			b.res[i] = transport.Result{Err: fmt.Errorf("%w: shard %s: its process could not be checked since it (re)connected", api.ErrQuarantined, sv.Shard)}
			if sv.Shard != "" {
				s.check(q, n, sv.Shard)
			}
			continue
		}
		if p.unsafe != nil {
			b.res[i] = transport.Result{Err: fmt.Errorf("shard %s: %w", sv.Shard, p.unsafe)}
			continue
		}
		if ends := p.started.Add(q.period); now.Before(ends) {
			b.res[i] = transport.Result{Err: quarantinedFor(p.started, q.period, now, p.seenUnsafe, sv.Shard)}
		}
	}
}
