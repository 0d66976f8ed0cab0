package rueidistransport

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/quorumlock/redlock/transport"
)

// script is a Lua script and its SHA1, the name EVALSHA calls it by.
type script struct{ src, sha string }

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// The Lua scripts behind every op but the single-key Acquire (a plain SET NX
// PX).
//
// releaseScript and extendScript are the ones every Redlock client uses, byte
// for byte, so that their SHA1s match and a lock taken by one client can be
// released by another. The fenced and multi-key scripts are written out for
// reading here; they keep the same data as the engine's own Redis transport
// (transport/redis), so both transports can share a master: a fencing counter
// is a hash with the count in field "n" and its owner (a lock value) in "o",
// with no expiry.
const (
	releaseScript = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	extendScript  = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`

	// KEYS[1] lock key, KEYS[2] its counter; ARGV[1] value, ARGV[2] ttl ms.
	// Returns the new count, or nil when the key was held.
	acquireFencedScript = `
if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return false
end
local counter = KEYS[2]
` + legacyCounter + `
local count = redis.call("hincrby", counter, "n", 1)
redis.call("hset", counter, "o", ARGV[1])
return count
`

	// KEYS[1] the counter; ARGV[1] the token, ARGV[2] the lock's value.
	// 1 when the count was below the token (now raised, with this owner)
	// or equal to it and owned by this value; else 0. Never lowers.
	raiseFenceScript = `
local counter = KEYS[1]
` + legacyCounter + `
local token = tonumber(ARGV[1])
local count = 0
local stored = redis.call("hget", counter, "n")
if stored then
  count = tonumber(stored)
  if count == nil then
    return redis.error_reply("fencing counter " .. counter .. " is not a number")
  end
end
if count < token then
  redis.call("hset", counter, "n", ARGV[1], "o", ARGV[2])
  return 1
end
if count == token and redis.call("hget", counter, "o") == ARGV[2] then
  return 1
end
return 0
`

	// Sets every key to ARGV[1] with PX ARGV[2] if none exists: 1, else 0.
	acquireMultiScript = `
for _, key in ipairs(KEYS) do
  if redis.call("exists", key) == 1 then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
return 1
`

	// Deletes each key that holds ARGV[1]: 1 if that was every key, else 0.
	releaseMultiScript = `
local deleted = 0
for _, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    deleted = deleted + redis.call("del", key)
  end
end
if deleted == #KEYS then return 1 end
return 0
`

	// PEXPIRE ARGV[2] on every key if each holds ARGV[1]: 1, else 0.
	extendMultiScript = `
for _, key in ipairs(KEYS) do
  if redis.call("get", key) ~= ARGV[1] then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call("pexpire", key, ARGV[2])
end
return 1
`

	// legacyCounter turns a counter left as a plain string (the count alone,
	// by an older engine) into the hash, with the same count and no owner,
	// as transport/redis does.
	legacyCounter = `
if redis.call("type", counter).ok == "string" then
  local old = redis.call("get", counter)
  redis.call("del", counter)
  redis.call("hset", counter, "n", old)
end`
)

var (
	releaseLua       = newScript(releaseScript)
	extendLua        = newScript(extendScript)
	acquireFencedLua = newScript(acquireFencedScript)
	raiseFenceLua    = newScript(raiseFenceScript)
	acquireMultiLua  = newScript(acquireMultiScript)
	releaseMultiLua  = newScript(releaseMultiScript)
	extendMultiLua   = newScript(extendMultiScript)

	allScripts = []*script{releaseLua, extendLua, acquireFencedLua, raiseFenceLua, acquireMultiLua, releaseMultiLua, extendMultiLua}
)

// scriptFor returns the script op runs as; nil for the single-key Acquire,
// which is a plain SET. A multi-key op with one key is the single-key op.
func scriptFor(op *transport.Op) *script {
	multi := len(op.Keys) > 1
	switch op.Kind {
	case transport.Acquire:
		if multi {
			return acquireMultiLua
		}
	case transport.Release:
		if multi {
			return releaseMultiLua
		}
		return releaseLua
	case transport.Extend:
		if multi {
			return extendMultiLua
		}
		return extendLua
	case transport.AcquireFenced:
		return acquireFencedLua
	case transport.RaiseFence:
		return raiseFenceLua
	}
	return nil
}
