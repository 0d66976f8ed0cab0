package redis

import (
	"errors"
	"strings"

	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/transport"
)

// The read-write scripts (capability transport.Shared). A key with readers
// is a sorted set at the lock key itself: member "r"+value for a reader,
// scored by its expiry (ms of the master's clock, from TIME inside the
// script, so no client clock is involved), and member "w"+value for a
// writer waiting on the readers, scored by minus its expiry, so that one
// ZCOUNT tells live readers (scores above now) and live markers (below
// -now) apart in O(log n). The key's PEXPIREAT is kept at its latest
// member's expiry, so it disappears with its last reader even if nobody
// touches it again. A writer holds the key as a plain string, as a mutex
// does: a SET NX finds a key with readers taken, and the reader scripts find
// a string key taken, so readers and every plain lock of the key exclude
// each other with no extra key (which also keeps every script on one key,
// for Redis Cluster).
//
// Every script takes KEYS[1] the lock key, ARGV[1] the value and (but
// ReleaseShared) ARGV[2] the ttl in ms, and answers 1 or 0.
const (
	sharedHead = `local k,v=KEYS[1],ARGV[1] local ty=redis.call("type",k).ok ` +
		`local t=redis.call("time") local now=tonumber(t[1])*1000+math.floor(tonumber(t[2])/1000) ` +
		// prune drops expired readers (0, now] and expired markers [-now, 0).
		`local function prune() redis.call("zremrangebyscore",k,"(0",now) redis.call("zremrangebyscore",k,-now,"(0") end ` +
		// fix sets the key's expiry to its latest member's, or deletes it.
		`local function fix() local e=0 ` +
		`local hi=redis.call("zrange",k,-1,-1,"withscores") if hi[2] and tonumber(hi[2])>e then e=tonumber(hi[2]) end ` +
		`local lo=redis.call("zrange",k,0,0,"withscores") if lo[2] and -tonumber(lo[2])>e then e=-tonumber(lo[2]) end ` +
		`if e<=now then redis.call("del",k) else redis.call("pexpireat",k,e) end end `

	// AcquireSharedScript admits reader ARGV[1] unless a writer holds the
	// key or a waiting writer's marker is live.
	AcquireSharedScript = sharedHead +
		`if ty=="none" then local e=now+tonumber(ARGV[2]) redis.call("zadd",k,e,"r"..v) redis.call("pexpireat",k,e) return 1 end ` +
		`if ty~="zset" then return 0 end prune() ` +
		`if redis.call("zcount",k,"-inf","("..(-now))>0 then return 0 end ` +
		`redis.call("zadd",k,now+tonumber(ARGV[2]),"r"..v) fix() return 1`
	// AcquireExclusiveScript sets the writer ARGV[1] (SET PX) when the key
	// is missing or holds no live reader (markers go with it); with live
	// readers it leaves the writer's marker and answers 0.
	AcquireExclusiveScript = sharedHead +
		`if ty=="none" then redis.call("set",k,v,"PX",ARGV[2]) return 1 end ` +
		`if ty~="zset" then return 0 end prune() ` +
		`if redis.call("zcount",k,"("..now,"+inf")>0 then redis.call("zadd",k,-(now+tonumber(ARGV[2])),"w"..v) fix() return 0 end ` +
		`redis.call("del",k) redis.call("set",k,v,"PX",ARGV[2]) return 1`
	// ReleaseSharedScript removes ARGV[1] as writer, reader or marker; 1
	// when it held the key as a writer or a live reader.
	ReleaseSharedScript = sharedHead +
		`if ty=="string" then if redis.call("get",k)==v then redis.call("del",k) return 1 end return 0 end ` +
		`if ty~="zset" then return 0 end prune() ` +
		`local held=redis.call("zscore",k,"r"..v) redis.call("zrem",k,"r"..v,"w"..v) fix() ` +
		`if held then return 1 end return 0`
	// ExtendSharedScript sets the expiry of ARGV[1]'s hold (writer or live
	// reader) to ARGV[2] ms from now; never re-creates one.
	ExtendSharedScript = sharedHead +
		`if ty=="string" then if redis.call("get",k)==v then redis.call("pexpire",k,ARGV[2]) return 1 end return 0 end ` +
		`if ty~="zset" then return 0 end prune() ` +
		`if not redis.call("zscore",k,"r"..v) then fix() return 0 end ` +
		`redis.call("zadd",k,"XX",now+tonumber(ARGV[2]),"r"..v) fix() return 1`
)

// sharedScript is the script of a read-write op kind.
func sharedScript(k transport.OpKind) scriptID {
	switch k {
	case transport.AcquireShared:
		return scriptAcquireShared
	case transport.ReleaseShared:
		return scriptReleaseShared
	case transport.ExtendShared:
		return scriptExtendShared
	}
	return scriptAcquireExclusive
}

// addShared appends a read-write op: EVALSHA sha 1 key value [ttl].
func (b *batch) addShared(op *transport.Op, i int) {
	argv := 2
	if op.Kind == transport.ReleaseShared {
		argv = 1
	}
	b.push(i, formFlag)
	b.buf = appendEvalSHA(b.buf, sharedScript(op.Kind), 1, argv)
	b.buf = appendBulk(b.buf, op.Key)
	b.buf = appendBulk(b.buf, op.Value)
	if argv == 2 {
		b.buf = b.appendTTL(op)
	}
}

// wrongType reports whether a single-key Release or Extend failed because
// the key holds readers (a sorted set): the standard scripts' GET raises
// WRONGTYPE before they change anything, so the master did answer, and the
// contract's answer is a definite "no" (the key does not hold the value).
func wrongType(op *transport.Op, err error) bool {
	if (op.Kind != transport.Release && op.Kind != transport.Extend) || len(op.Keys) > 1 {
		return false
	}
	var se resp3.SimpleError
	return errors.As(err, &se) && strings.HasPrefix(se.S, "WRONGTYPE")
}
