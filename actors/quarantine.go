package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// quarantine keeps a restarted master from voting (README, "Guarantees, and their limits"). A master
// that restarted without persistence has forgotten its locks; if it voted
// at once, a second client could reach a majority while the first still
// holds the lock. So a master votes only once it has been up for period,
// the largest TTL in use: by then every lock it may have held has expired.
//
// A run id that changes from one the node knew starts the period afresh,
// from the moment the node read it, whatever the new process's uptime: the
// address may now reach a different server (a VIP or DNS flip, a promoted
// replica) that has been up for long and never held our keys. The first
// run id a node reads is compared with the one the engine read when it was
// built (seen); with none to compare with, it is trusted by its uptime, as
// any fresh engine must.
//
// The node reads run_id and uptime on start, whenever the transport's epoch
// (its connection) changes, and every interval. Grants are counted only
// from a batch served entirely within the epoch that was checked, by a
// master past its period; any other grant becomes an ErrQuarantined failure.
// A nil *quarantine (off, or a transport that is no ServerReporter) vets
// nothing. A transport that is a transport.ShardReporter (a Redis Cluster)
// is vetted per shard instead (shards, in shardquarantine.go).
type quarantine struct {
	period   time.Duration
	interval time.Duration
	server   transport.ServerReporter
	name     string
	index    int
	twins    *twins
	logger   *slog.Logger

	// seen is the run id read when the engine was built (Config.RunIDs),
	// "" if none: the process the first read must find, or be another.
	// Only startOf uses it; the eviction count of that read is not known.
	seen string

	vetted   bool      // we know when the master behind vettedAt started
	vettedAt uint64    // the epoch the last info was read in
	started  time.Time // when the master process started (never later than true)
	runID    string
	evicted  uint64 // the evicted count of the process runID, as last read
	unsafe   error  // why the master's configuration keeps it from voting (unsafeOf), nil if nothing does
	// seenUnsafe is why the master was last seen unsafe, at started: the
	// quarantine that follows says so, since the process did not restart.
	seenUnsafe error
	checkErr   error // why the last read of the master's info failed, nil if it did not
	fetching   bool
	parked     []*batch // results waiting for the info read that vets them
	cancel     scheduler.CancelFunc
	// life ends when the node stops: a read still out then is given up,
	// and its answer not sent to the stopped node (a dead letter).
	life context.Context
	end  context.CancelFunc

	shards *shards // per shard, instead of the fields above; nil for one server
}

type infoTick struct{}

type infoResult struct {
	shard string // the shard read (shards mode only)
	gen   uint64 // the shard's read it answers (shards mode only)
	// handoffs: the shard's Handoffs count before the read (shards mode
	// only).
	handoffs uint64
	epoch    uint64
	info     transport.ServerInfo
	err      error
	at       time.Time
}

func (q *quarantine) epoch() uint64 {
	if q == nil || q.shards != nil {
		return 0
	}
	return q.server.Epoch()
}

func (q *quarantine) start(n *node, ctx actor.Context) {
	if q == nil {
		return
	}
	q.cancel = sendRepeatedly(ctx, q.interval, q.interval, ctx.Self(), &infoTick{})
	q.check(n)
}

func (q *quarantine) stop() {
	if q != nil && q.cancel != nil {
		q.cancel()
	}
	if q != nil && q.end != nil {
		q.end()
	}
}

// read runs a read of the master's (or a shard's) info off the actor's
// goroutine: fill fills r, under a context that ends with the node, and r
// goes to the node unless the node stopped meanwhile.
func (q *quarantine) read(n *node, r *infoResult, fill func(context.Context, *infoResult)) {
	if q.life == nil {
		q.life, q.end = context.WithCancel(context.Background())
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(q.life, max(n.timeout, time.Second))
		fill(ctx, r)
		cancel()
		if q.life.Err() != nil {
			return
		}
		r.at = time.Now()
		n.root.Send(n.self, r)
	}()
}

// check reads the master's info off the actor's goroutine.
func (q *quarantine) check(n *node) {
	if q != nil && q.shards != nil {
		q.shards.checkAll(q, n)
		return
	}
	if q == nil || q.fetching {
		return
	}
	q.fetching = true
	q.read(n, &infoResult{}, func(ctx context.Context, r *infoResult) {
		// The epoch is read first: the info then describes that epoch's
		// master or a later one, never an earlier one.
		r.epoch = q.epoch()
		r.info, r.err = q.server.ServerInfo(ctx)
	})
}

func (q *quarantine) learn(n *node, r *infoResult) {
	if q.shards != nil {
		q.shards.learn(q, n, r)
		return
	}
	q.fetching = false
	q.checkErr = r.err
	if r.err != nil {
		// Unknown is not trusted: a master we cannot read does not vote.
		q.vetted = false
		n.m.unread(n.index, errors.Is(r.err, transport.ErrReply))
		q.twins.set(q.index, "")
		q.release(n)
		return
	}
	known := q.runID
	if known == "" {
		known = q.seen // a first read: the engine saw this process when it was built
	}
	started, another := startOf(known, q.started, r)
	if another && q.period > 0 {
		q.logger.Warn("redlock: another master process behind this address (restarted, or the address now reaches a different server); in quarantine", "master", q.name,
			"old_run_id", known, "run_id", r.info.RunID, "uptime", r.info.Uptime,
			"votes_again_in", time.Until(started.Add(q.period)).Round(time.Millisecond))
	}
	unsafe := unsafeOf(r.info, q.runID, q.evicted)
	if unsafe != nil {
		// It may be dropping keys now, or has dropped some; once it
		// stops, it may lack keys of locks still valid, as a restarted
		// master does. So it sits out a period from the last time it was
		// seen unsafe.
		started = r.at
		q.seenUnsafe = unsafe
	} else if another {
		q.seenUnsafe = nil // a new process: its quarantine is a restart's
	}
	q.runID, q.started, q.evicted = r.info.RunID, started, r.info.Evicted
	q.setUnsafe(unsafe)
	n.m.learned(n.index, q.votesAt(started), unsafe != nil)
	q.twins.set(q.index, r.info.RunID)
	if q.epoch() != r.epoch {
		// Reconnected while reading: the reply may describe the server
		// behind the new connection, not the one that answered r.epoch's
		// batches (an address that flipped away and back), so it vouches
		// for no epoch. Read again.
		q.vetted = false
		q.check(n)
	} else {
		q.vettedAt, q.vetted = r.epoch, true
	}
	q.release(n)
}

// startOf is when the quarantine counts the process that r describes as
// started, given the run id and start known before (runID "" for none), and
// whether r found another process than that one.
func startOf(runID string, known time.Time, r *infoResult) (started time.Time, another bool) {
	started = r.at.Add(-r.info.Uptime)
	switch {
	case runID != "" && r.info.RunID != runID:
		// Another process behind the address: restarted, or a VIP or DNS
		// flip, a promoted replica, a reused port. Its uptime says nothing
		// about our keys: a process up for a week may never have held
		// them. Every key it lacks was set before it appeared here, so it
		// votes one period after we first saw it (r.at is later than
		// that, which errs on the safe side), never sooner.
		return r.at, true
	case r.info.RunID == runID && started.Before(known):
		// The same process: a coarse uptime gives a slightly different
		// start each time, and only the latest (safest) one counts.
		return known, false
	}
	return started, false
}

// park holds a batch whose epoch has not been checked yet, while the check
// is out, instead of reporting its grants as quarantined: right after start
// or a reconnect that would fail locks for one round trip for nothing.
func (q *quarantine) park(n *node, b *batch) bool {
	if q != nil && q.shards != nil {
		return q.shards.park(q, n, b)
	}
	if q == nil || (q.vetted && b.epoch == q.vettedAt) || b.epoch == ^uint64(0) {
		return false
	}
	// A batch with no answer but releases' (every op failed: the master
	// is down or silent) has nothing to vet: held for the read, which takes
	// as long as the master is silent, its failures would come late.
	if !answered(b) {
		return false
	}
	q.check(n)
	q.parked = append(q.parked, b)
	return true
}

// answered says whether the master answered an op of b other than a
// release: an answer that vetting may turn into a failure.
func answered(b *batch) bool {
	for i := range b.res {
		if countsAsVote(b, i, true) {
			return true
		}
	}
	return false
}

// release delivers the parked batches, now vetted by what was just learned
// (a batch from an older epoch than the check stays unvetted).
func (q *quarantine) release(n *node) {
	if q.shards != nil {
		q.shards.release(q, n)
		return
	}
	parked := q.parked
	q.parked = nil
	n.finishAll(parked)
}

// vet turns the grants of batch b into ErrQuarantined failures unless the
// master may vote. A master that is one server with another entry (see
// twins) has every answer turned into that configuration error, so that
// both entries show it. Releases are left alone: they only ever help.
func (q *quarantine) vet(n *node, b *batch) {
	if q == nil {
		return
	}
	if q.shards != nil {
		q.shards.vet(q, n, b)
		return
	}
	var reason error
	answers := false // refusals too, not only grants
	switch {
	case !q.vetted || b.epoch != q.vettedAt:
		reason = fmt.Errorf("%w: its process could not be checked since it (re)connected", api.ErrQuarantined)
		if q.period == 0 {
			reason = fmt.Errorf("%w: it could not be checked since it (re)connected (its run id, role and eviction policy)", api.ErrUnsafeMaster)
		}
		if q.checkErr != nil {
			// The cause as text, not wrapped: a context error of the
			// check's own timeout is not the caller's.
			reason = fmt.Errorf("%w (the last check: %v)", reason, q.checkErr)
		}
		q.check(n)
	default:
		if reason = q.twins.err(q.index); reason != nil {
			answers = true
			break
		}
		if reason = q.unsafe; reason != nil {
			answers = true
			break
		}
		if q.period == 0 {
			return
		}
		now := time.Now()
		if !now.Before(q.started.Add(q.period)) {
			return
		}
		reason = quarantinedFor(q.started, q.period, now, q.seenUnsafe, "")
	}
	for i := range b.res {
		if b.ops[i].Kind != transport.Release && b.ops[i].Kind != transport.ReleaseShared && (b.res[i].OK || (answers && b.res[i].Err == nil)) {
			b.res[i] = transport.Result{Err: reason}
		}
	}
}

// quarantinedFor is the answer of a master (or of its shard, when shard is
// not "") in quarantine until started+period: up for a time since it
// started, or, when started is when it was last seen unsafe (seen says
// why), kept out since then, which its process did not restart for.
func quarantinedFor(started time.Time, period time.Duration, now time.Time, seen error, shard string) error {
	who := ""
	if shard != "" {
		who = "shard " + shard + " "
	}
	ago, left := now.Sub(started).Round(time.Millisecond), started.Add(period).Sub(now).Round(time.Millisecond)
	if seen != nil {
		// seen as text: its ErrUnsafeMaster is not this answer's sentinel.
		return fmt.Errorf("%w: %skept out for a period after it was last seen unsafe, %v ago (%v); votes again in %v", api.ErrQuarantined, who, ago, seen, left)
	}
	return fmt.Errorf("%w: %sup for %v, votes again in %v", api.ErrQuarantined, who, ago, left)
}

// votesAt is when a master that started at start votes again, for the
// metrics: with the quarantine off, never in quarantine (the Unix epoch,
// as before any check). Not start itself: a collection that read its clock
// just before the check's reply was timed would see a quarantine of a few
// microseconds ("redlock run: ... in restart quarantine for 0s more").
func (q *quarantine) votesAt(start time.Time) time.Time {
	if q.period == 0 {
		return noQuarantineEnd
	}
	return start.Add(q.period)
}

// noQuarantineEnd is the metrics' quarantine end of a master never in one.
var noQuarantineEnd = time.Unix(0, 0)

// unsafeOf is why a master whose info is si must not vote whatever its
// uptime, or nil: its configuration can drop a lock's key while the lock is
// held, which a quarantine cannot make up for; or it has dropped keys since
// the read before, of process runID ("" for none) that had evicted keys
// evicted.
//
// Any change of the evicted count of one process counts: a master switched
// to an evicting policy and back between two reads shows no policy to
// either, only its count that moved; and CONFIG RESETSTAT zeroes the count,
// so a decrease may hide evictions since. (A reset followed by as many
// evictions as were counted before, between two reads, goes unseen.) A
// count read first, or of another process, says nothing of our keys: a
// restart is the quarantine's business.
func unsafeOf(si transport.ServerInfo, runID string, evicted uint64) error {
	switch {
	case si.ReplicaOf != "":
		return fmt.Errorf("%w: it is a replica of %s, whose expiries and deletes remove keys set on it (its votes would be its master's, counted again); list independent masters (REPLICAOF NO ONE makes it one)", api.ErrUnsafeMaster, si.ReplicaOf)
	case si.Eviction != "":
		return fmt.Errorf("%w: it evicts keys to stay under its memory limit (%s), a held lock's key among them, which lets a second holder in; set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction) or no maxmemory", api.ErrUnsafeMaster, si.Eviction)
	case runID == "" || si.RunID != runID || si.Evicted == evicted:
		return nil
	case si.Evicted < evicted:
		return fmt.Errorf("%w: its evicted_keys went down from %d to %d since it was last read (CONFIG RESETSTAT), so keys may have been evicted meanwhile, a held lock's among them; keep maxmemory-policy noeviction", api.ErrUnsafeMaster, evicted, si.Evicted)
	}
	return fmt.Errorf("%w: it evicted %d keys since it was last read (evicted_keys %d, then %d), a held lock's maybe among them, though no read saw an evicting policy (switched to one and back in between); keep maxmemory-policy noeviction", api.ErrUnsafeMaster, si.Evicted-evicted, evicted, si.Evicted)
}

// setUnsafe records why the master's configuration keeps it from voting,
// and says so in the log when that changes.
func (q *quarantine) setUnsafe(err error) {
	if (err == nil) != (q.unsafe == nil) || (err != nil && err.Error() != q.unsafe.Error()) {
		if err != nil {
			q.logger.Error("redlock: master does not vote: its configuration can drop lock keys, or it dropped some", "master", q.name, "error", err)
		} else {
			q.logger.Warn("redlock: master votes again: its configuration no longer drops lock keys, and it dropped none since the last read", "master", q.name)
		}
	}
	q.unsafe = err
}
