package actors

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/cenkalti/backoff/v4"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"go.opentelemetry.io/otel/trace"
)

// CallKind is what a Call asks the coordinator to do.
type CallKind uint8

const (
	// Acquire runs acquisition attempts until one wins or the budget ends.
	Acquire CallKind = iota + 1
	// Release releases a lock on every master.
	Release
	// Extend extends a lock on every master.
	Extend
	// AcquireAny takes any one slot of a semaphore (see anyof.go).
	AcquireAny
)

type phase uint8

const (
	phaseNew       phase = iota
	phaseAcquiring       // an acquire attempt is out; waiting for a quorum decision
	phaseWaiting         // between attempts, a retry timer is armed
	phaseCleaning        // the last attempt failed; waiting for its releases
	phaseReleasing       // Unlock: waiting for every master
	phaseExtending       // Extend: waiting for a quorum decision
	phaseFencing         // a fenced acquire won: writing its token back
	phaseQueued          // waiting for its turn in the key's local queue
	phaseDone
)

// Call is one Lock, TryLock, Unlock or Extend travelling through the
// coordinator. The caller fills the request fields, submits it, waits on
// Done and then reads the result fields. Everything else belongs to the
// coordinator: no other goroutine touches it, so it needs no locking; the
// coordinator may go on using it after Done is closed.
//
// An acquire call uses one Value for every attempt, so that any key an
// attempt left behind carries it. A call that wins leaves the keys of its
// earlier attempts to Unlock, whose release on every master deletes them
// with the lock's own. A call that ends without the lock keeps releasing
// them in the background after Done is closed, until each master has
// answered or the keys must have expired (see coordinator.leave).
type Call struct {
	// callState is everything a lifetime of the Call owns: a reused Call
	// (callpool.go) is reset by zeroing it whole, so a field added there is
	// reset without anyone remembering to.
	callState

	// done is closed when the result is there: always made by NewCall;
	// for a Call of GetCall only if the caller asks (MakeDone), anew for
	// each lifetime (callpool.go says why). Without it, wg signals.
	done chan struct{}
	// wg signals the result of a Call without done: one Add by Submit, one
	// Done by finish, one Wait by the caller (Call.Wait). It allocates
	// nothing, and it is back at zero, free of any synctest bubble, before
	// the Call can be reused.
	wg sync.WaitGroup

	// gen counts the Call's retirements (callpool.go): every message that
	// names the Call carries the gen of its lifetime, and a handler that
	// finds gen moved on ignores it without reading anything else. Atomic:
	// a stale message's handler may read it while the Call's next owner
	// runs on another goroutine.
	gen atomic.Uint64
	// refs counts the holders of a pooled Call: the caller, and the
	// coordinator from Submit to retirement. The last to let go recycles it.
	refs atomic.Int32
}

// callState is a Call's per-lifetime state (see Call).
type callState struct {
	// Request, set by the caller before Submit and read-only afterwards.
	// The one-byte fields and slot share a word, so that none pads a word
	// of its own: a Call is 592 bytes (size class 640), and nearly every
	// cache line of it is touched by both the caller and the coordinator
	// in each lifetime (BENCHMARKS.md, "Fourteenth session").
	Kind CallKind
	// Fenced asks for a fencing token (single-key acquire only).
	Fenced bool
	// Queue makes an acquire wait in the key's local queue: goroutines of
	// this engine that want the same key contend one at a time, in order.
	Queue bool
	// Mode is the kind of lock: a mutex (the zero value), a reader or a
	// writer of a read-write lock (rw.go).
	Mode Mode
	// slot is the coordinator's: the call's place in its active set, plus
	// one (0: not active).
	slot  int32
	Op    string   // the user-facing name for errors: "lock", "trylock", ...
	Key   string   // the key, or the first of Keys
	Keys  []string // a multi-key lock's keys, nil for one key
	Value string
	TTL   time.Duration
	Drift time.Duration
	Retry api.Retry
	// Sem is the semaphore's name: for AcquireAny (whose Key is the name)
	// and for the Release of a slot, which then wakes the semaphore's
	// local waiter. Calls with Sem run in the name's shard.
	Sem string
	// Permits is the semaphore's number of slots (AcquireAny).
	Permits int
	// Until is the lock's validity end, if known (zero if not), for an
	// Extend or a Release of a granted lock. Past it the lock is lost
	// whatever the masters say: an extension's ops still queued then are
	// dropped unsent (expires), and a resent release's refusal no longer
	// counts as released (slow.go, resentCounts).
	Until time.Time

	// Result, valid once Done is closed.
	Err      error
	Start    time.Time     // when the attempt was decided (Start+Validity: send + ttl - drift)
	Validity time.Duration // for a held or extended lock: ttl - elapsed - drift
	Token    int64         // the fencing token of a fenced acquire
	Span     trace.Span    // the caller's span, if recording: attempts become its events

	hash uint64 // keyHash(Key), set by Submit
	// life is gen as Submit found it: the lifetime that the messages about
	// this submission carry. Written by the caller before Submit, read-only
	// after; pooled: the Call came from GetCall (callpool.go).
	life     uint64
	pooled   bool
	retiring bool // the coordinator has let go of this lifetime (callpool.go)

	// Coordinator-owned state.
	phase     phase
	wake      bool   // a local Unlock of the key came while this attempt was out
	seq       uint64 // identifies the current attempt; late replies carry an older one
	attempts  int
	t1        time.Time
	sent      time.Time // the earliest send time of this phase's grants (acquire, extend)
	stale     int       // this attempt's ops dropped as stale in a node's queue
	uncounted int       // attempts retried for overload: not counted against MaxAttempts
	resent    int       // releases sent again after transport.ErrNotSent (resendUnsent)
	slowSince time.Time // send of this call's first op met by a slow master, since a phase without (slow.go)
	granted   int
	refused   int
	failed    int
	replied   int    // replies to the current phase's ops
	answered  uint64 // bit i: master i answered in this phase
	grants    uint64 // bit i: master i granted in this phase
	errs      []error
	token     int64 // the largest token granted in this attempt
	lastErr   error
	lastAns   []api.MasterAnswer
	bo        *backoff.ExponentialBackOff
	parent    *Call                // the AcquireAny this call tries one slot for
	any       *anyOf               // an AcquireAny's state
	timer     scheduler.CancelFunc // the armed retry timer, or a finished call's cleanup timer
	// left tracks the keys that ended attempts may have left (see
	// coordinator.leave); nil until an attempt fails, so that a call that
	// wins at once carries only the pointer.
	left *leftovers
}

// leftovers is where an acquire call's value may remain from attempts that
// did not win. Bit i of mask: the value may be on master i without being
// counted as held; it clears once a release of generation gen gets a
// definite answer there. Bit i of cleaning: such a release is out to
// master i.
type leftovers struct {
	mask     uint64
	cleaning uint64
	gen      int           // the attempts made when mask was last set
	wait     time.Duration // the delay before the next background cleanup
}

// stop disarms the call's timer. A retry tick it already sent is dropped by
// its stale seq, a cleanup tick by the coordinator's pending set.
func (c *Call) stop() {
	if c.timer != nil {
		c.timer()
		c.timer = nil
	}
}

// NewCall returns a Call ready to be filled and submitted.
func NewCall(kind CallKind, op, key, value string, ttl, drift time.Duration) *Call {
	c := &Call{done: make(chan struct{})}
	c.Kind, c.Op, c.Key, c.Value, c.TTL, c.Drift = kind, op, key, value, ttl, drift
	return c
}

// Done is closed when the call has its result. It is nil for a Call of
// GetCall without MakeDone: wait for such a call with Wait.
func (c *Call) Done() <-chan struct{} { return c.done }

// from is when the current phase's validity starts: the earliest send time
// of the grants counted so far. Every granting master applied the op at or
// after it, so its key lives at least TTL (less drift) from then; counting
// from t1 instead would charge the time the ops waited in the node queues
// against the lock. Without a send time (a transport that never went
// through a node, which cannot happen for a grant), t1.
func (c *Call) from() time.Time {
	if c.sent.IsZero() {
		return c.t1
	}
	return c.sent
}

// monoNow is now, read as base plus the time since base: one read of the
// monotonic clock where time.Now reads the wall clock too, about half a
// clock read's cost, which the coordinator pays on every grant. base must
// come from time.Now (it then carries a monotonic reading; without one,
// time.Since reads both clocks and the result is time.Now's). The wall
// clock of the result is base's plus the monotonic time since, so a step
// of the wall clock during the round trip moves neither the validity nor
// the grant's Start. In a testing/synctest bubble time.Since reads the
// bubble's clock.
func monoNow(base time.Time) time.Time { return base.Add(time.Since(base)) }

// acquires reports whether kind takes a key (a SET of some kind): such an
// op is worth sending only while its attempt can still win (opRequest's
// deadline), and the node drops it unsent after that.
func acquires(kind transport.OpKind) bool {
	switch kind {
	case transport.Acquire, transport.AcquireFenced, transport.AcquireShared, transport.AcquireExclusive:
		return true
	}
	return false
}

// opRequest is one operation for the masters. The coordinator sends the same
// pointer to every node actor; it is read-only once sent.
type opRequest struct {
	// call is only for the coordinator that sent it, which checks gen
	// before reading anything of it: a node never reads the Call, which
	// may be in its next lifetime by then (callpool.go). What the node
	// needs of it is copied: hash (the key's, for the in-flight table)
	// and slowable (slow.go).
	call     *Call
	gen      uint64
	hash     uint64
	seq      uint64
	op       transport.Op
	deadline time.Time // acquires and extensions (expires): not worth sending after this
	shard    int32
	reply    bool // false: the sender wants no reply
	// cleanup marks a release of what ended attempts left; its seq is the
	// generation (leftovers.gen) it covers, not an attempt's seq, and its
	// reply counts whatever the call's phase.
	cleanup bool
	// resent marks a release sent again to a master that was slow
	// (coordinator.resendSlow).
	resent bool
	// slowable: a timeout of this op may be slow rather than failed
	// (slow.go: an acquire's or an Unlock's op that wants a reply), for
	// op.TTL, the call's silenceLimit.
	slowable bool
	// refs counts the answers its coordinator still awaits before it may
	// reuse the request; 0 for a request that is not reused (reqpool.go).
	// Only that coordinator reads or writes it.
	refs int32
	// lone: the call was its coordinator's only one, with nothing queued
	// behind it, when this was sent; on an immediate transport its batch
	// runs without an I/O goroutine (node.doHere).
	lone bool
}

// reply is one master's answer to one opRequest.
type reply struct {
	req *opRequest
	res transport.Result
}

// nodeReplies carries the replies of one batch of one master to one
// coordinator shard: one message per batch instead of one per operation.
// The batch's send time is the message's, not each reply's: a reply is 40
// bytes instead of 64 for the coordinator to read on its core.
type nodeReplies struct {
	node  int
	sent  time.Time // when the batch went to the transport; zero if never sent
	items []reply
}

// Reply messages are pooled: the coordinator is their only reader and
// hands them back once it has counted them. They start with room for the
// replies of a batch at 256 lockers (about 18 a master), where a smaller
// slice was grown by most messages a pool had just made.
var repliesPool = sync.Pool{New: func() any { return &nodeReplies{items: make([]reply, 0, 64)} }}

func getReplies(node int) *nodeReplies {
	m := repliesPool.Get().(*nodeReplies)
	m.node = node
	return m
}

func putReplies(m *nodeReplies) {
	clear(m.items) // drop the pointers to calls
	m.items, m.sent = m.items[:0], time.Time{}
	repliesPool.Put(m)
}

// keySeed hashes keys for sharding and for the nodes' in-flight tables.
var keySeed = maphash.MakeSeed()

func keyHash(key string) uint64 { return maphash.String(keySeed, key) }

// cancelCall asks the coordinator to abandon a call because its context
// ended.
type cancelCall struct {
	call *Call
	gen  uint64
	err  error
}

// retryTick is the backoff timer's message; seq drops a tick that a
// cancellation has already made stale (a cancelled timer cannot recall a
// message it already sent).
type retryTick struct {
	call *Call
	gen  uint64
	seq  uint64
}

// cleanupTick is the timer message of a finished call's next background
// cleanup.
type cleanupTick struct {
	call *Call
	gen  uint64
}

// wakeShard tells a coordinator that a multi-key Release run by another
// shard has released the keys of the call, some of them its own. It is the
// Release call itself under another type, so the message costs no
// allocation; the receiver reads only Keys, which is read-only once
// submitted.
type wakeShard Call

// closeCalls asks a coordinator to finish every active call with ErrClosed
// and close done; the coordinator keeps running to absorb late replies.
type closeCalls struct{ done chan struct{} }
