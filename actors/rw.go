package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/transport"
)

// Mode is the kind of lock a Call takes, and so which ops it sends.
type Mode uint8

const (
	// Mutex is a plain lock: Acquire (or AcquireFenced), Release, Extend.
	Mutex Mode = iota
	// Reader is a read-write lock's shared side: AcquireShared, and
	// ReleaseShared and ExtendShared for its entry among the readers.
	Reader
	// Writer is a read-write lock's exclusive side: AcquireExclusive, which
	// leaves a writer-waiting marker where live readers refuse it. Once
	// granted a writer is a plain value at the key, extended as a mutex
	// is; its Unlock is a ReleaseShared, which also drops the markers it
	// left on masters that refused it. A failed attempt's cleanup is a
	// plain Release, on purpose: it deletes what the attempt may have set
	// and leaves the marker, which must outlive the attempt to hold back
	// new readers until the next one (a ReleaseShared would drop it). The
	// call drops its markers when it gives up (giveUp).
	Writer
)

func (m Mode) acquire() transport.OpKind {
	switch m {
	case Reader:
		return transport.AcquireShared
	case Writer:
		return transport.AcquireExclusive
	}
	return transport.Acquire
}

// release is Unlock's op.
func (m Mode) release() transport.OpKind {
	if m != Mutex {
		return transport.ReleaseShared
	}
	return transport.Release
}

// cleanup is the op that releases what a failed attempt may have left.
func (m Mode) cleanup() transport.OpKind {
	if m == Reader {
		return transport.ReleaseShared
	}
	return transport.Release
}

func (m Mode) extend() transport.OpKind {
	if m == Reader {
		return transport.ExtendShared
	}
	return transport.Extend
}

// giveUp drops the writer-waiting markers of a writer that ends without
// the lock, so that readers need not wait for them to expire. It wants no
// reply: only a writer finished by Close sends it so (giveUpAtClose); finish
// sends it as an answered, resent cleanup (giveUpLeft). Sent after the
// call's last cleanup release, so the node applies it after that.
func (c *coordinator) giveUp(ctx actor.Context, call *Call) {
	r := &opRequest{
		call:  call,
		gen:   call.life,
		hash:  call.hash,
		op:    transport.Op{Kind: transport.ReleaseShared, Key: call.Key, Value: call.Value},
		shard: c.shard,
	}
	for i := range c.nodes {
		c.toNode(ctx, i, r)
	}
}
