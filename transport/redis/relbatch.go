package redis

import (
	"fmt"
	"hash/maphash"

	"github.com/quorumlock/redlock/transport"
)

// ReleaseBatchScript is the standard release script (ReleaseScript) over
// several keys, each with its own value: it deletes KEYS[i] if it holds
// ARGV[i], and returns a bitmask whose bit i-1 says whether KEYS[i] was
// deleted. GET goes through pcall so that a key holding another type (a
// WRONGTYPE error, which ReleaseScript's callers read as "not held") answers
// 0 for that key instead of aborting the script half way. A Lua number holds
// 52 bits exactly, hence MaxReleaseBatch.
//
// The masters' CPU is the limit of the engine at many lockers, and most of
// it was the release script: one EVALSHA per key costs a master 2.7 µs of
// CPU per release against 1.6-1.8 µs when 8-32 keys share one (bench/
// relscript; BENCHMARKS.md, "Batched release script").
const ReleaseBatchScript = `local m, b = 0, 1 for i = 1, #KEYS do if redis.pcall("get",KEYS[i]) == ARGV[i] then redis.call("del",KEYS[i]) m = m + b end b = b * 2 end return m`

// MaxReleaseBatch is the most keys one ReleaseBatchScript may release: the
// bits of its reply. DefaultReleaseBatch, the default of
// Config.ReleaseBatch, is a little below, which also bounds how long one
// script holds a master (about 50 µs).
const (
	MaxReleaseBatch     = 52
	DefaultReleaseBatch = 48
)

// groupIndex marks, in batch.index, a reply that answers a group of
// coalesced releases (batch.members) rather than one op.
const groupIndex = -2

// addAll appends the ops that passed Check (results[i].Err == nil), in
// order, coalescing plain single-key Releases into ReleaseBatchScript
// calls of at most maxK keys.
//
// Ops of a batch apply in slice order (the transport contract), and a group
// runs where it is closed, so its releases move past the ops between them
// and the close. That is invisible to every op of another key: Redis runs
// each command (and each script) alone, and a release, a SET NX or a
// compare-then-PEXPIRE reads and writes only its own key. So a group is
// closed (sent) before any op that touches one of its keys, before a
// second release of a key it holds, and before any op this does not reason
// about (fenced, multi-key, read-write ops): per key, the master sees the
// ops in slice order. A group of one is sent as the plain release.
//
// No coalescing on a Redis Cluster node (clusterFence) or under ASKING: a
// script's keys must share a slot there (CROSSSLOT otherwise), and the
// batch's keys need not.
func (b *batch) addAll(ops []transport.Op, results []transport.Result, maxK int) {
	if maxK < 2 || b.asking || b.clusterFence {
		for i := range ops {
			if results[i].Err == nil {
				b.add(&ops[i], i)
			}
		}
		return
	}
	b.group = b.group[:0]
	b.bloom = [4]uint64{}
	for i := range ops {
		if results[i].Err != nil {
			continue
		}
		op := &ops[i]
		if op.Kind == transport.Release && len(op.Keys) <= 1 {
			h := maphash.String(groupSeed, op.Key)
			if b.inGroup(ops, op.Key, h) {
				b.closeGroup(ops)
			}
			b.group = append(b.group, i)
			b.bloom[h>>6&3] |= 1 << (h & 63)
			if len(b.group) == maxK {
				b.closeGroup(ops)
			}
			continue
		}
		if len(b.group) > 0 && b.conflicts(ops, op) {
			b.closeGroup(ops)
		}
		b.add(op, i)
	}
	b.closeGroup(ops)
}

var groupSeed = maphash.MakeSeed()

// conflicts reports whether op may touch a key of the open group: it does
// if it is a single-key Acquire or Extend of one of them, and is taken to
// for any op of another kind.
func (b *batch) conflicts(ops []transport.Op, op *transport.Op) bool {
	if (op.Kind != transport.Acquire && op.Kind != transport.Extend) || len(op.Keys) > 1 {
		return true
	}
	return b.inGroup(ops, op.Key, maphash.String(groupSeed, op.Key))
}

// inGroup reports whether the open group releases key (of hash h).
func (b *batch) inGroup(ops []transport.Op, key string, h uint64) bool {
	if b.bloom[h>>6&3]&(1<<(h&63)) == 0 {
		return false
	}
	for _, i := range b.group {
		if ops[i].Key == key {
			return true
		}
	}
	return false
}

// closeGroup appends the open group's releases as one command.
func (b *batch) closeGroup(ops []transport.Op) {
	g := b.group
	switch len(g) {
	case 0:
		return
	case 1:
		b.add(&ops[g[0]], g[0])
	default:
		b.replies = append(b.replies, reply{form: formMask, g0: int32(len(b.members)), gn: int32(len(g))})
		b.index = append(b.index, groupIndex)
		b.members = append(b.members, g...)
		b.buf = appendEvalSHA(b.buf, scriptReleaseBatch, len(g), len(g))
		for _, i := range g {
			b.buf = appendBulk(b.buf, ops[i].Key)
		}
		for _, i := range g {
			b.buf = appendBulk(b.buf, ops[i].Value)
		}
	}
	b.group = b.group[:0]
	b.bloom = [4]uint64{}
}

// groupOps returns the ops (indexes into the batch's ops) that reply j
// answers: one, or a group's.
func (b *batch) groupOps(j int) []int {
	if b.index[j] == groupIndex {
		r := &b.replies[j]
		return b.members[r.g0 : r.g0+r.gn]
	}
	return b.index[j : j+1]
}

// memberResult is the result of the x-th release of group reply r, as the
// plain release would have answered it: deleted (OK) or not held, or, if
// the script failed, its error for every release of the group (a script
// that failed part way may have deleted some keys, and a release's Err
// means just that: no definite answer).
func (t *Transport) memberResult(op *transport.Op, r *reply, x int) transport.Result {
	if r.err != nil {
		// Not t.result: its WRONGTYPE-is-"not held" holds for one key's
		// script, not for a group's (pcall keeps GET from raising it).
		return transport.Result{Err: fmt.Errorf("redis %s: %s %q: %w", t.name, op.Kind, op.Key, r.err)}
	}
	return transport.Result{OK: r.n>>x&1 == 1}
}
