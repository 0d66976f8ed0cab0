// Package transport is the plugin interface between the lock engine and one
// master. The engine owns one Transport per master and talks to it only in
// batches, so a transport can pipeline: everything a node actor has queued
// goes to the master in one write, and the replies come back in one read.
//
// The required interface is deliberately small (Do and Close), and so is
// the required op set: Acquire, Release and Extend on single keys. Anything
// more a transport can offer is an optional interface that the engine
// discovers by type assertion, in the way database/sql/driver does it:
//
//   - Capabler: the optional ops it implements (Fencing: AcquireFenced and
//     RaiseFence; MultiKey: ops over several keys; Shared: the read-write
//     ops AcquireShared, ReleaseShared, ExtendShared, AcquireExclusive).
//     Without it, none; the engine then refuses the features that need
//     them (WithFencing, LockAll over several keys, RLock and WLock) with
//     api.ErrInvalidArgument instead of sending ops the master cannot
//     apply.
//   - ServerReporter: the run id and uptime of the master process, and an
//     epoch that changes with the connection. Without it the master is not
//     quarantined after a restart.
//   - ShardReporter: for a master that is several servers (shards, as in
//     a Redis Cluster), which shard served each op and in which of its
//     epochs, and each shard's run id and uptime. With it the restart
//     quarantine applies per shard instead of to the whole master.
//   - Namer: a name for error messages.
//   - Immediate: Do never waits (an in-process master), so the engine may
//     run a batch on the goroutine that queued it.
//
// A wrapper (a fault injector, a metrics layer) that embeds a Transport
// hides these unless it forwards them.
//
// A transport written in an afternoon implements Do and Close for the three
// required ops, answers every other op with transport.CheckFor's error
// (wrapping errors.ErrUnsupported), and runs the required part of
// transport/transporttest.
//
// # Contract
//
// A Transport must honour these rules; the conformance suite in
// transport/transporttest checks them, and every transport (ours or yours)
// should run it from its own tests.
//
//   - Ops within one batch are applied to the master in slice order. A
//     transport that retries part of a batch (the Redis transport resends
//     ops that met NOSCRIPT) must keep it: an op may be retried only if no
//     later op of the batch that may have run touches one of its keys;
//     otherwise it fails with an Err wrapping ErrNotApplied (the engine
//     then sends an Unlock's release again later). The engine sends one lock call's
//     cleanup Release(k, v) and its next Acquire(k, v) in one batch, so a
//     release retried after the SET would delete a key reported as granted.
//   - Do may be called concurrently from several goroutines. The engine never
//     has two batches in flight at once that share a key, so per-key order
//     holds across batches without the transport doing anything special.
//   - Acquire is SET key value NX PX ttl: OK=true when the key was set,
//     OK=false (with a nil Err) when the key already exists.
//   - Release deletes the key only if it holds Value; OK reports whether it
//     did. Extend sets a new PX of TTL only if the key holds Value; it never
//     creates a missing key. OK reports whether it did.
//   - Result.Err is set when the master did not give a definite answer for
//     that op. Such an op may still have been applied: a timed-out SET may
//     have succeeded on the master. The engine therefore cleans up after
//     every op that failed, and a transport must never report OK=false with a
//     nil Err unless the master really answered "no". (An op rejected by
//     Check, with ErrInvalidOp, was never sent.) An Err that is the
//     master's error reply should be marked with Reply (ErrReply), so that
//     the engine's message says the masters refused, not that they did not
//     answer.
//   - Do returns a non-nil error only when the batch as a whole failed (for
//     example the connection broke or ctx ended); it then sets every
//     Result.Err as well, so callers can read results alone.
//   - Do must return once ctx is done, even if the master never answers.
//   - Do must not use ctx after it returns, unless ctx was done by then:
//     the engine reuses a batch's context, one that never ended, for a later
//     batch. (Work that Do abandons because ctx ended may keep it.)
//   - An op that needs a capability the transport does not declare
//     (AcquireFenced and RaiseFence without Fencing, Keys of two or more
//     without MultiKey, the read-write ops without Shared) is not applied and answers OK=false with an Err
//     wrapping errors.ErrUnsupported; the batch's other ops go on. A
//     malformed op answers ErrInvalidOp, whatever its kind (CheckFor does
//     both). The engine never sends such ops; this keeps a mistake loud.
//   - A key that holds readers (AcquireShared) exists for the plain ops:
//     Acquire and AcquireFenced refuse it; Release and Extend answer it a
//     definite "no" (never an Err), as a key that holds another value.
//   - Fencing counters (AcquireFenced, RaiseFence) never go down, never
//     expire, and change only as those two ops say: AcquireFenced adds one
//     and takes ownership, RaiseFence confirms a token only above every
//     count the master has seen, or equal to the count it owns itself.
//   - After Close, Do fails every op with an error wrapping ErrClosed.
//     Close is idempotent.
package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// OpKind names an operation on one master.
type OpKind uint8

const (
	// Acquire is SET key value NX PX ttl.
	Acquire OpKind = iota + 1
	// Release is the compare-and-delete script: delete key if it holds value.
	Release
	// Extend is the compare-and-pexpire script: set a new ttl on key if it
	// holds value. A missing key is never re-created.
	Extend
	// AcquireFenced (capability Fencing) is Acquire that, when the key
	// was set, also increments the key's fencing counter and makes Value
	// its owner, in the same atomic step, and returns the new count in
	// Result.Token. If the increment fails after the SET (a corrupt
	// counter), the op reports an Err: the key may have been set, as with
	// any failed op.
	//
	// A key's fencing counter is a count and an owner (a lock value), kept
	// under FenceKey(Key) with no expiry; on Redis it is a hash with fields
	// "n" and "o".
	AcquireFenced
	// RaiseFence (capability Fencing) is the fencing write-back of the
	// lock whose value is Value and whose token is Token. It succeeds (OK) when the counter is below
	// Token, and then sets the count to Token and the owner to Value; or
	// when the count is Token and the owner Value already, and then changes
	// nothing. Otherwise (a count above Token, or equal to it but owned by
	// another value) it changes nothing and answers a definite "no": OK
	// false, Err nil. It never lowers a count. A missing counter counts 0.
	//
	// The owner is what makes tokens monotonic: a write-back that also
	// confirmed "already at least Token" would let a lock whose token came
	// from masters that missed a newer grant confirm an older token
	// (README, "Guarantees, and their limits"; the proof is in SAFETY.md).
	RaiseFence
	// AcquireShared (capability Shared) admits Value as a reader of Key for
	// TTL: OK when the key is free or holds only readers and no live
	// writer-waiting marker; a definite "no" when a writer (any plain
	// value: Acquire, AcquireFenced, AcquireExclusive) holds the key or a
	// waiting writer's marker is live. A value that is already a reader of
	// the key is admitted again and its expiry set to TTL from now.
	//
	// The readers live at the lock key itself, each with its own expiry
	// (on Redis: a sorted set of "r"+value scored by the expiry in ms of
	// the master's clock, with the key's PEXPIREAT kept at its latest
	// member), so a key that holds readers exists for every plain op:
	// Acquire and AcquireFenced refuse it, and Release and Extend answer
	// it a definite "no", as for a key holding another value. An expired
	// reader counts for nothing and is dropped when next touched.
	AcquireShared
	// ReleaseShared (capability Shared) removes Value from Key whatever it
	// holds it as: a reader entry, a writer's plain value (then the key is
	// deleted), or a writer-waiting marker. OK reports whether Value held
	// the key (as a live reader or as its writer); dropping only a marker
	// is not OK. It is the one release of read-write locks, readers and
	// writers alike, so a cleanup never needs to know which kind an
	// attempt left behind.
	ReleaseShared
	// ExtendShared (capability Shared) sets a new expiry of TTL from now on
	// Value's hold of Key: the key's PX when Value is its writer, or
	// Value's reader entry (and the key's expiry, to the latest reader's)
	// when Value is a live reader. It never re-creates an expired or
	// missing hold. OK reports whether it extended.
	ExtendShared
	// AcquireExclusive (capability Shared) is the writer's Acquire: SET NX
	// PX when the key is missing, or holds only expired readers and
	// writer-waiting markers (they are cleared); a definite "no" while a
	// writer holds the key or a reader of it is live. Refused because of
	// live readers, it leaves (or refreshes) Value's writer-waiting marker
	// for TTL from now, and while a live marker is there AcquireShared
	// admits no new reader: the readers in place drain, and the writer gets
	// in (writer preference, SAFETY.md). The marker goes with the
	// writer's grant, with ReleaseShared of Value, or by its own expiry,
	// so a writer that crashed blocks new readers for at most TTL.
	AcquireExclusive
)

// Shared reports whether k is one of the read-write ops (capability
// Shared).
func (k OpKind) Shared() bool { return k >= AcquireShared && k <= AcquireExclusive }

// FencePrefix starts the name of every fencing counter. Lock keys must not
// start with it.
const FencePrefix = "redlock-fence:"

// FenceKey is the name of key's fencing counter on a master.
func FenceKey(key string) string { return FencePrefix + key }

func (k OpKind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case Release:
		return "release"
	case Extend:
		return "extend"
	case AcquireFenced:
		return "acquire-fenced"
	case RaiseFence:
		return "raise-fence"
	case AcquireShared:
		return "acquire-shared"
	case ReleaseShared:
		return "release-shared"
	case ExtendShared:
		return "extend-shared"
	case AcquireExclusive:
		return "acquire-exclusive"
	}
	return "unknown"
}

// Op is one operation on one master. TTL is used by Acquire, AcquireFenced
// and Extend and must be a whole number of milliseconds (the resolution of
// PX): rounding it either way would make the master's expiry differ from the
// one the engine computes validity with, so Check rejects anything else.
//
// Multi-key (capability MultiKey when Keys has two or more): when Keys is
// non-empty, an Acquire, Release or Extend covers every key in Keys at once
// and atomically (one script on Redis), and Key is the first of them.
// Acquire sets all keys only if none exists; Release deletes each key that
// holds Value and is OK if it deleted every one; Extend extends only if
// every key holds Value. Fenced ops are single-key.
type Op struct {
	Kind  OpKind
	Key   string
	Keys  []string
	Value string
	TTL   time.Duration
	Token int64 // RaiseFence: the lock's token, written back to the counter
}

// Result is the outcome of one Op.
type Result struct {
	// OK is true when the op took effect: the key was set, deleted or
	// extended, or the token confirmed by the fencing counter.
	OK bool
	// Token is AcquireFenced's new fencing count (when OK).
	Token int64
	// Err is non-nil when the master gave no definite answer. The op may
	// still have been applied.
	Err error
}

// Transport is one master.
type Transport interface {
	// Do applies ops in order and fills results[i] for ops[i];
	// len(results) == len(ops). See the package documentation for the
	// rules a transport must keep.
	Do(ctx context.Context, ops []Op, results []Result) error
	// Close releases the transport's resources (connections, goroutines).
	Close() error
}

// ServerInfo is what a master says about itself.
type ServerInfo struct {
	// RunID changes every time the master process starts.
	RunID string
	// Uptime is how long the master process has been running. It must
	// never exceed the real uptime (round down, and subtract the error of
	// the source): the engine ends a restarted master's quarantine by it.
	Uptime time.Duration
	// ReplicaOf is the address of the server this one replicates, "" when
	// it replicates none. A replica's keys follow its master's (the
	// master's expiries and deletes remove keys set on the replica), so the
	// engine does not count a replica's votes.
	ReplicaOf string
	// Eviction describes how the master may evict keys to stay under a
	// memory limit (for Redis: its maxmemory-policy, when maxmemory is set
	// and the policy is not noeviction), "" when it never evicts. Eviction
	// can drop a lock's key while the lock is held, so the engine does not
	// count such a master's votes.
	Eviction string
	// Evicted is how many keys the master has evicted since the process
	// started (for Redis: evicted_keys, INFO stats), 0 when it cannot
	// tell. The engine treats any change between two reads of the same
	// process (the same RunID) as keys dropped, a held lock's key maybe
	// among them: a master switched to an evicting policy and back between
	// two reads shows no Eviction in either, but its count moved. A
	// decrease counts too (CONFIG RESETSTAT zeroes the count).
	Evicted uint64
}

// ServerReporter is an optional interface: a transport that can say which
// master process it talks to. The engine needs it to keep a restarted master
// out of the quorum (the restart quarantine); a transport without it is
// assumed to never restart without its data, and the engine logs a warning
// for it. Its two methods only work together, so they are one interface.
//
// ServerInfo reports the master's run id and uptime, and whether it
// replicates another server, evicts keys, or has evicted some. The engine reads it also with
// the quarantine off, to keep one server listed twice, a replica and an
// evicting master from voting; a master whose ServerInfo fails does not
// vote (api.ErrUnsafeMaster with the quarantine off), so a transport that
// cannot tell should not implement ServerReporter.
// A ServerInfo that the master refused (it answered with an error: an ACL,
// say) should be marked with Reply (ErrReply), so that the engine does not
// take the master for unreachable.
//
// Epoch changes every time the transport starts talking to the master over
// a new connection (and so, maybe, to a master process that restarted and
// lost its keys). The engine reads it around every batch and does not count
// votes from an epoch whose ServerInfo it has not checked. The epoch is per
// Transport value; its starting value is arbitrary (0 before a first
// connection is fine). A transport with no connection of its own (an
// in-process master) changes it when the master restarts.
//
// The guarantee the engine relies on: ServerInfo called after Epoch
// returned E describes the master process behind E or a later one, never an
// earlier one. So an info read during which the epoch moved vouches for no
// epoch (it may describe the process behind the later one), and the engine
// reads again.
type ServerReporter interface {
	ServerInfo(ctx context.Context) (ServerInfo, error)
	Epoch() uint64
}

// Served says which shard gave one op's result: the shard's name (its
// address, say) and the shard's epoch around the round trip that gave it.
type Served struct {
	// Shard is "" when no shard gave the result (the op was never sent, or
	// failed before any shard answered).
	Shard string
	// Epoch is ShardEpoch(Shard) as read before the shard was sent the op,
	// or Unvetted when it moved before the reply came back (the reply may
	// come from a connection, and a process, the engine has not checked).
	Epoch uint64
}

// Unvetted is the Served.Epoch of a result that no one epoch of its shard
// vouches for.
const Unvetted = ^uint64(0)

// ShardReporter is an optional interface: a transport whose master is
// several servers, each holding its own part of the keys (the shards of a
// Redis Cluster, each owning some hash slots), that can say which shard
// served each op. The engine then quarantines each shard on its own (see
// ServerReporter for the quarantine): a shard that restarted empty does not
// vote for the ops it serves until its period ends, while the master's
// other shards go on voting. A transport with it should still implement
// ServerReporter, describing the master as a whole (the engine uses that to
// tell two entries that are one master apart, and a wrapper that forwards
// only ServerReporter then gets the coarser, whole-master quarantine). A
// single-server transport needs none of this.
//
// DoServed is Do, and also fills served[i] (len(served) == len(ops)) with
// the shard that gave results[i]: the last one the op was sent to, after
// any redirect (an op that a shard hands to another, as Redis Cluster's
// MOVED and ASK do, is served by the other). The engine counts a grant only
// if that shard, in that epoch, is past its quarantine.
//
// ShardEpoch is the shard's own epoch, with ServerReporter's rules: it
// changes whenever the transport talks to the shard over a new connection,
// and ShardInfo called after ShardEpoch returned E describes the process
// behind E or a later one, never an earlier one. ShardInfo reads the
// shard's run id and uptime; it may be asked about a shard that is no
// longer in ShardNames (the engine vets results after the fact).
//
// Handoffs counts the times part of the shard's keyspace went to another
// shard: a slot map that gives a slot of the shard to another, an op the
// shard redirected (MOVED, ASK) and that was resent elsewhere. It is bumped
// before the other shard can serve that part. The engine needs it because
// keys travel: a shard that restarted empty and then handed its slots over
// (a resharding) hands over its loss, and the shard that takes them must
// not vote for them before the restarted shard's quarantine ends. So a
// grant counts only once every hand-off seen has been followed by a read of
// its shard's run id that found no restart; a hand-off from a shard in
// quarantine, or one that a restart may have preceded, quarantines the
// whole master until that shard's period ends. A transport whose shards
// never exchange keys returns 0.
//
// ShardNames lists the shards that serve ops now (those of the current slot
// map), which the engine checks ahead of their first results. The list may
// change at any time; a shard name must keep meaning one address while
// the transport lives.
type ShardReporter interface {
	DoServed(ctx context.Context, ops []Op, results []Result, served []Served) error
	ShardNames() []string
	Handoffs(shard string) uint64
	ShardEpoch(shard string) uint64
	ShardInfo(ctx context.Context, shard string) (ServerInfo, error)
}

// Capabilities is a set of the optional parts of the op set. A transport
// without any (the minimal one) implements Acquire, Release and Extend on
// single keys, and nothing else.
type Capabilities uint32

const (
	// Fencing: the AcquireFenced and RaiseFence ops and their counters.
	// The engine needs it on every master for api.WithFencing.
	Fencing Capabilities = 1 << iota
	// MultiKey: Acquire, Release and Extend over several keys at once
	// (Op.Keys with more than one key), atomically. The engine needs it on
	// every master for LockAll and TryLockAll over more than one key.
	MultiKey
	// Shared: the read-write ops AcquireShared, ReleaseShared, ExtendShared
	// and AcquireExclusive. The engine needs it on every master for
	// RLock, TryRLock, WLock and TryWLock.
	Shared
)

// Known is every capability this version defines.
const Known = Fencing | MultiKey | Shared

// Has reports whether c includes every capability in want.
func (c Capabilities) Has(want Capabilities) bool { return c&want == want }

func (c Capabilities) String() string {
	var parts []string
	if c&Fencing != 0 {
		parts = append(parts, "fencing")
	}
	if c&MultiKey != 0 {
		parts = append(parts, "multi-key")
	}
	if c&Shared != 0 {
		parts = append(parts, "shared")
	}
	if rest := c &^ Known; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Capabler is an optional interface: a transport that implements more than
// the minimal op set says which parts. A transport without it has no
// capabilities. The answer must not change over the transport's life.
type Capabler interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what t declares: t.Capabilities() if t is a
// Capabler, else none.
func CapabilitiesOf(t Transport) Capabilities {
	if c, ok := t.(Capabler); ok {
		return c.Capabilities()
	}
	return 0
}

// Needs returns the capabilities op needs beyond the minimal op set.
func Needs(op *Op) Capabilities {
	var c Capabilities
	if op.Kind == AcquireFenced || op.Kind == RaiseFence {
		c |= Fencing
	}
	if len(op.Keys) > 1 {
		c |= MultiKey
	}
	if op.Kind.Shared() {
		c |= Shared
	}
	return c
}

// CheckFor is Check for a transport whose capabilities are have: it reports
// why op is malformed (ErrInvalidOp), or else, when op needs a capability
// that have lacks, an error wrapping errors.ErrUnsupported; nil when the
// transport can apply op. A minimal transport calls it on every op and
// answers the error as the op's Result.Err, without sending the op.
func CheckFor(op *Op, have Capabilities) error {
	if err := Check(op); err != nil {
		return err
	}
	if missing := Needs(op) &^ have; missing != 0 {
		return fmt.Errorf("%s: needs %s: %w", op.Kind, missing, errors.ErrUnsupported)
	}
	return nil
}

// Immediate is an optional interface: a transport whose Do never waits. It
// does no I/O, sleeps on nothing, and holds no lock that anything keeps
// for long (the memory transport, a master in this process), so a Do
// takes microseconds. When Immediate reports true, the engine may call Do
// for a call that is alone in its coordinator on the caller's own
// goroutine, where it otherwise hands every batch to an I/O goroutine and
// back: two goroutine wake-ups per batch, most of a lone call's cost on
// such a master. The engine asks once, when it starts; the answer must not
// change.
//
// A transport that may block must not report true: a fault injector that
// delays or drops, anything over a network or a pipe. A caller's goroutine
// would wait in it, with the engine's locks held. A wrapper that embeds a
// Transport hides Immediate, and rightly, unless it forwards it knowing
// that it adds no wait of its own.
type Immediate interface {
	Immediate() bool
}

// IsImmediate reports whether t is an Immediate that says true.
func IsImmediate(t Transport) bool {
	i, ok := t.(Immediate)
	return ok && i.Immediate()
}

// Namer is an optional interface: a transport that can name its master for
// error messages (for example "127.0.0.1:6379"). Without it the engine uses
// the master's position ("master 3"). The name identifies the master: the
// engine refuses two transports with one name as one master given twice, so
// give each master its own (its address, say).
type Namer interface {
	Name() string
}

// Errors a transport reports, wrapped with detail.
var (
	// ErrClosed: Do was called after Close.
	ErrClosed = errors.New("transport closed")
	// ErrUnavailable: the master cannot be reached now (connection refused,
	// reconnecting). Returned fast, without waiting for a timeout.
	ErrUnavailable = errors.New("master unavailable")
	// ErrInvalidOp: the op itself is malformed; Check says how.
	ErrInvalidOp = errors.New("invalid op")
	// ErrNotSent: the batch was not sent because its deadline had passed
	// before the transport began to send it (a CPU-starved client reached
	// Do too late). No master saw it, and the lateness was the client's,
	// not the master's: the engine treats an acquire failed so as overload
	// (it is retried, and shows as latency), not as a master that did not
	// answer.
	ErrNotSent = errors.New("not sent: its deadline passed before it could be sent")
	// ErrNotApplied: the master refused the op without applying it (a
	// NOSCRIPT, a MOVED or ASK), and the transport could not send it again
	// within the batch without breaking the batch's order per key (a later
	// op of the batch that touches its key had already run). The master is
	// up and the op may be sent again in a later batch: the engine resends
	// an Unlock's release that failed so, as it does after ErrNotSent,
	// rather than leave the key to its TTL as for a master that is down.
	ErrNotApplied = errors.New("refused unapplied, and not resent within the batch")
	// ErrReply: the master answered the op at once with an error reply
	// (Redis: OOM when full under maxmemory-policy noeviction, NOPERM for
	// a user whose ACL lacks the command, BUSY, WRONGTYPE...) instead of a
	// yes or a no. It is up and reachable, and the reply says what to fix
	// on it; the op may still have been applied in part, as for any Err.
	// Mark such errors with Reply, so that the engine tells the user that
	// the masters refused the command, not that they did not answer. A
	// ServerInfo error that wraps it tells the engine that the master is
	// up though it cannot be checked: it does not vote, and its metrics
	// show it reachable; any other ServerInfo error counts as the master
	// not answering.
	ErrReply = errors.New("master answered with an error reply")
)

// Reply marks err, a master's error reply to an op, as such: errors.Is
// finds ErrReply (and err's own chain) in the result, whose message is
// err's, unchanged.
func Reply(err error) error { return replyError{err} }

type replyError struct{ err error }

func (e replyError) Error() string   { return e.err.Error() }
func (e replyError) Unwrap() []error { return []error{e.err, ErrReply} }

// Check reports the first reason op is malformed, or nil. Transports use it
// so that they all reject the same ops with the same error.
func Check(op *Op) error {
	switch op.Kind {
	case Acquire, Extend, AcquireFenced, AcquireShared, ExtendShared, AcquireExclusive:
		if op.TTL < time.Millisecond {
			return fmt.Errorf("%w: %s: ttl %v is below 1ms", ErrInvalidOp, op.Kind, op.TTL)
		}
		if op.TTL%time.Millisecond != 0 {
			return fmt.Errorf("%w: %s: ttl %v is not a whole number of milliseconds", ErrInvalidOp, op.Kind, op.TTL)
		}
	case Release, ReleaseShared:
	case RaiseFence:
		if op.Token < 1 {
			return fmt.Errorf("%w: %s: token %d must be positive", ErrInvalidOp, op.Kind, op.Token)
		}
	default:
		return fmt.Errorf("%w: unknown op kind %d", ErrInvalidOp, op.Kind)
	}
	if op.Key == "" {
		return fmt.Errorf("%w: %s: empty key", ErrInvalidOp, op.Kind)
	}
	if op.Value == "" {
		// RaiseFence too: its Value is the owner it compares and stores,
		// and an empty one would match a counter whose owner is unknown.
		return fmt.Errorf("%w: %s: empty value", ErrInvalidOp, op.Kind)
	}
	if len(op.Keys) > 0 {
		if op.Kind == AcquireFenced || op.Kind == RaiseFence {
			return fmt.Errorf("%w: %s: fenced ops take one key", ErrInvalidOp, op.Kind)
		}
		if op.Kind.Shared() && len(op.Keys) > 1 {
			return fmt.Errorf("%w: %s: read-write ops take one key", ErrInvalidOp, op.Kind)
		}
		if op.Keys[0] != op.Key {
			return fmt.Errorf("%w: %s: Key must be Keys[0]", ErrInvalidOp, op.Kind)
		}
		for i, k := range op.Keys {
			if k == "" {
				return fmt.Errorf("%w: %s: empty key among Keys", ErrInvalidOp, op.Kind)
			}
			if strings.HasPrefix(k, FencePrefix) {
				return fmt.Errorf("%w: %s: key %q uses the fencing counters' prefix", ErrInvalidOp, op.Kind, k)
			}
			// Keys are few (the engine allows 64): a quadratic scan
			// allocates nothing.
			for _, prev := range op.Keys[:i] {
				if prev == k {
					return fmt.Errorf("%w: %s: key %q listed twice", ErrInvalidOp, op.Kind, k)
				}
			}
		}
		return nil
	}
	if strings.HasPrefix(op.Key, FencePrefix) {
		return fmt.Errorf("%w: %s: key %q uses the fencing counters' prefix", ErrInvalidOp, op.Kind, op.Key)
	}
	return nil
}

// Fail sets every result's Err to err and returns err. Transports use it when a
// whole batch fails.
func Fail(results []Result, err error) error {
	for i := range results {
		results[i] = Result{Err: err}
	}
	return err
}
