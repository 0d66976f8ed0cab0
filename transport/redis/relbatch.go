package redis

import (
	"hash/maphash"

	"github.com/quorumlock/redlock/transport"
)

// ReleaseBatchScript is the standard release script (ReleaseScript) over
// several distinct keys, each with its own value: it deletes KEYS[i] if it
// holds ARGV[i], and returns a bitmask whose bit i-1 says whether KEYS[i]
// was deleted. A Lua number holds 52 bits exactly, hence MaxCoalesce.
//
// It reads every key with one MGET and deletes the matches with one DEL:
// two commands a script rather than two a key, which costs a master about a
// quarter less CPU per release than a GET and a DEL each (bench/relscript;
// BENCHMARKS.md, "One MGET per script"). MGET answers nil for a key that
// holds another type, so such a key answers 0 ("not held", as
// ReleaseScript's WRONGTYPE is read) and cannot abort the script half way.
// Reading all before deleting any is the same as comparing and deleting
// key by key only because the keys are distinct: the transport never puts
// two ops of one key in a script (addAll).
//
// The masters' CPU is the limit of the engine at many lockers, and most of
// it was the release script: one EVALSHA per key costs a master 2.7 µs of
// CPU per release against 1.3-1.5 µs when 32-48 keys share this one.
const ReleaseBatchScript = `local v = redis.call("mget", unpack(KEYS)) local d, m, b = {}, 0, 1 for i = 1, #KEYS do if v[i] == ARGV[i] then d[#d+1] = KEYS[i] m = m + b end b = b * 2 end if #d > 0 then redis.call("del", unpack(d)) end return m`

// ExtendBatchScript is ExtendScript over several distinct keys: it sets PX
// ARGV[n+i] on KEYS[i] if it holds ARGV[i] (n keys, each with its own value
// and ttl), and returns the bitmask of the keys it extended, as
// ReleaseBatchScript does, reading them with one MGET. Auto-extension sends
// many Extends per batch.
const ExtendBatchScript = `local n = #KEYS local v = redis.call("mget", unpack(KEYS)) local m, b = 0, 1 for i = 1, n do if v[i] == ARGV[i] then redis.call("pexpire", KEYS[i], ARGV[n+i]) m = m + b end b = b * 2 end return m`

// MaxCoalesce is the most keys one ReleaseBatchScript or ExtendBatchScript
// may take: the bits of its reply. DefaultCoalesce, the default of
// Config.Coalesce, is a little below, which also bounds how long one script
// holds a master (about 50 µs).
const (
	MaxCoalesce     = 52
	DefaultCoalesce = 48
)

// groupIndex marks, in batch.index, a reply that answers a group of
// coalesced releases or extends (batch.members) rather than one op.
const groupIndex = -2

// coalescable reports whether op may join a group: a plain single-key
// Release or Extend.
func coalescable(op *transport.Op) bool {
	return (op.Kind == transport.Release || op.Kind == transport.Extend) && len(op.Keys) <= 1
}

// opGroup is an open group of Releases or of Extends while addAll encodes:
// the ops (indexes into the batch's ops) and a Bloom filter of their keys.
type opGroup struct {
	idx   []int
	bloom [4]uint64
}

// has reports whether the group holds an op of key (of hash h).
func (g *opGroup) has(ops []transport.Op, key string, h uint64) bool {
	if g.bloom[h>>6&3]&(1<<(h&63)) == 0 {
		return false
	}
	for _, i := range g.idx {
		if ops[i].Key == key {
			return true
		}
	}
	return false
}

func (g *opGroup) add(i int, h uint64) {
	g.idx = append(g.idx, i)
	g.bloom[h>>6&3] |= 1 << (h & 63)
}

// groupOf is the group (batch.groups) an op of a coalescable kind joins.
func groupOf(k transport.OpKind) int {
	if k == transport.Extend {
		return 1
	}
	return 0
}

// addAll appends the ops that passed Check (results[i].Err == nil), in
// order, coalescing plain single-key Releases into ReleaseBatchScript
// calls, and Extends into ExtendBatchScript calls, of at most maxK keys.
// One group of each kind may be open at a time.
//
// Ops of a batch apply in slice order (the transport contract), and a group
// runs where it is closed, so its ops move past the ops between them and
// the close. That is invisible to every op of another key: Redis runs each
// command (and each script) alone, and a release, a SET NX or a
// compare-then-PEXPIRE reads and writes only its own key. So a group is
// closed (sent) before any op that touches one of its keys (a second op of
// a key it holds included, and so the two open groups never share a key),
// and before any op this does not reason about (fenced, multi-key,
// read-write ops): per key, the master sees the ops in slice order. A group
// of one is sent as the plain command.
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
	for i := range ops {
		if results[i].Err != nil {
			continue
		}
		op := &ops[i]
		open := len(b.groups[0].idx)+len(b.groups[1].idx) > 0
		switch {
		case coalescable(op):
			h := maphash.String(groupSeed, op.Key)
			for x := range b.groups {
				if b.groups[x].has(ops, op.Key, h) {
					b.closeGroup(ops, x)
				}
			}
			x := groupOf(op.Kind)
			b.groups[x].add(i, h)
			if len(b.groups[x].idx) == maxK {
				b.closeGroup(ops, x)
			}
			continue
		case !open:
		case op.Kind == transport.Acquire && len(op.Keys) <= 1:
			h := maphash.String(groupSeed, op.Key)
			for x := range b.groups {
				if b.groups[x].has(ops, op.Key, h) {
					b.closeGroup(ops, x)
				}
			}
		default:
			b.closeGroup(ops, 0)
			b.closeGroup(ops, 1)
		}
		b.add(op, i)
	}
	b.closeGroup(ops, 0)
	b.closeGroup(ops, 1)
}

var groupSeed = maphash.MakeSeed()

// closeGroup appends open group x as one command.
func (b *batch) closeGroup(ops []transport.Op, x int) {
	g := b.groups[x].idx
	switch len(g) {
	case 0:
		return
	case 1:
		b.add(&ops[g[0]], g[0])
	default:
		b.replies = append(b.replies, reply{form: formMask, g0: int32(len(b.members)), gn: int32(len(g))})
		b.index = append(b.index, groupIndex)
		b.members = append(b.members, g...)
		id, argv := groupScript(ops[g[0]].Kind), len(g)
		if id == scriptExtendBatch {
			argv *= 2 // values, then ttls
		}
		b.buf = appendEvalSHA(b.buf, id, len(g), argv)
		for _, i := range g {
			b.buf = appendBulk(b.buf, ops[i].Key)
		}
		for _, i := range g {
			b.buf = appendBulk(b.buf, ops[i].Value)
		}
		if id == scriptExtendBatch {
			for _, i := range g {
				b.buf = b.appendTTL(&ops[i])
			}
		}
	}
	b.groups[x] = opGroup{idx: g[:0]}
}

// groupScript is the script of a group of ops of kind k.
func groupScript(k transport.OpKind) scriptID {
	if k == transport.Extend {
		return scriptExtendBatch
	}
	return scriptReleaseBatch
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

// memberResult is the result of the x-th op of group reply r, as the plain
// script would have answered it: deleted or extended (OK), or not held;
// or, if the script failed, its error for every op of the group (a script
// that failed part way may have applied some, and an op's Err means just
// that: no definite answer).
func (t *Transport) memberResult(op *transport.Op, r *reply, x int) transport.Result {
	if r.err != nil {
		// Not t.result: its WRONGTYPE-is-"not held" holds for one key's
		// script, not for a group's (MGET does not raise it).
		return transport.Result{Err: t.opErr(op, r.err)}
	}
	return transport.Result{OK: r.n>>x&1 == 1}
}
