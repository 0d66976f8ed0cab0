// Package memory is an in-process master: the default master of the lock
// engine when no Redis is configured, and a fast, deterministic stand-in for
// one in tests.
//
// A Master keeps Redis's semantics for the lock operations (SET NX PX,
// compare-and-delete, compare-and-pexpire, their atomic multi-key forms, the
// fencing counters of AcquireFenced and RaiseFence, and the readers and
// writer-waiting markers of the read-write ops), including real
// expiry on the monotonic clock. It starts no goroutines: expired keys are
// treated as absent when touched and are swept a few at a time by the
// operations themselves, the way Redis samples keys for active expiry, so
// memory stays bounded by the live keys plus a fraction of them, not by every
// key ever written.
//
// Each call to Master.Transport returns an independent client handle: closing
// one only stops that handle, the keys stay on the master, just as closing a
// Redis connection does not delete its keys. Master.Restart simulates a master
// process restarting without persistence; every client handle is a
// transport.ServerReporter whose run id and epoch change with it.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock/transport"
)

const (
	shardBits = 6
	numShards = 1 << shardBits // a power of two, so a hash picks a shard with a mask

	// Every sweepEvery-th operation on a shard samples up to sweepSample of
	// its entries and deletes the expired ones, repeating (at most
	// sweepRounds times) while more than a quarter of a sample had expired.
	// Removing up to 80 entries per 8 operations outpaces any insert rate, so
	// expired entries settle at roughly a quarter of the live ones, while no
	// operation pays for more than 320 table slots visited under the shard
	// lock (table.sweepRound).
	sweepEvery  = 8
	sweepSample = 20
	sweepRounds = 4

	// A shard of at most sweepFloor entries is not swept: sweeping it looked
	// at every slot of its table, a few cache lines, every 8th op, which
	// was 2.6 % of a lock cycle at 256 lockers (about four keys a shard). Its
	// expired entries go when touched, or by a sweep once it grows; so at
	// most sweepFloor expired entries a shard, 512 a master, outlive
	// their TTL unswept.
	sweepFloor = 8
)

// base anchors the monotonic nanoseconds stored as expiry times; int64
// nanoseconds since process start are cheaper to store and compare than
// time.Time and never see wall-clock steps.
var base = time.Now()

func monotime() int64 { return int64(time.Since(base)) }

type entry struct {
	value   string
	expires int64 // monotime() at which the key is gone
	// rd is set, and value empty, while the key holds readers and waiting
	// writers' markers (see shared.go): the key then exists for the plain
	// ops, which no lock value matches, and expires with its last member.
	rd *readers
}

// fence is one key's fencing counter: the count and its owner, the value of
// the lock that last set it (transport.RaiseFence says why it needs one).
type fence struct {
	n     int64
	owner string
}

type shardState struct {
	mu sync.Mutex
	m  table // the keys (table.go)
	// fences holds the fencing counters of the shard's lock keys, by lock
	// key (Redis keeps them under transport.FenceKey(key); here they get a
	// map of their own so that lock keys and counters cannot collide and
	// the counters never meet the sweep). Counters never expire; only
	// Restart forgets them. nil until the shard's first fenced op.
	fences map[string]fence
	ops    uint32 // operations since the last sweep decision; wraps harmlessly
}

// shard is padded to a cache line so that hot shards do not slow their
// neighbours through false sharing of their mutexes.
type shard struct {
	shardState
	_ [64 - unsafe.Sizeof(shardState{})%64]byte
}

// life is what Restart replaces: the identity, start time and epoch of one
// run of the master, published together in one pointer swap so that no
// reader ever sees one run's id with another run's epoch.
type life struct {
	runID   string
	started time.Time
	epoch   uint64
}

// A multi-key op locks its shards as a bitmask in one uint64: this fails to
// compile if numShards ever outgrows it.
const _ uint64 = 1 << (numShards - 1)

// Master is an in-process master with real TTL semantics; safe for concurrent
// use. The zero value is not usable; call New or NewNamed.
type Master struct {
	name string
	seed maphash.Seed
	life atomic.Pointer[life] // replaced by Restart; see client.Epoch
	// shards are locked one at a time by single-key ops, and several at
	// once, always in ascending index order, by multi-key ops and Restart,
	// which keeps them free of deadlocks.
	shards [numShards]shard
}

// New returns an empty master named "memory-" followed by 8 random hex
// digits, so that errors from several memory masters can be told apart.
func New() *Master { return NewNamed("") }

// NewNamed returns an empty master that reports name from Name (an empty name
// gets the generated one New uses).
func NewNamed(name string) *Master {
	if name == "" {
		name = "memory-" + randomHex(4)
	}
	m := &Master{name: name, seed: maphash.MakeSeed()}
	m.life.Store(newLife(1))
	return m
}

func newLife(epoch uint64) *life {
	// Redis's run_id is 40 hex digits (20 random bytes); matching its shape
	// keeps log lines and the engine's quarantine messages uniform.
	return &life{runID: randomHex(20), started: time.Now(), epoch: epoch}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails since Go 1.24: it crashes the program instead
	return hex.EncodeToString(b)
}

// Restart simulates the master process restarting without persistence: every
// key and every fencing counter is forgotten, the run id changes, the uptime
// starts again from 0 and the epoch of every client handle changes.
//
// Restart is atomic with respect to each operation: it holds every shard
// while it clears them and publishes the new run and epoch, so an operation
// lands wholly before it (old keys, old epoch) or wholly after it (no old
// key, and the new run id and epoch already visible). The operations of one
// batch may still land on both sides, as against a real master restarting
// under load. That is what lets the engine rely on Epoch: a batch that saw
// the new run's keyspace reads a changed epoch after Do, and a ServerInfo
// fetched after reading that epoch shows the new run id. Clearing shard by
// shard without holding them all would break that.
func (m *Master) Restart() {
	for i := range m.shards {
		m.shards[i].mu.Lock()
	}
	for i := range m.shards {
		s := &m.shards[i]
		// A fresh table, not a cleared one: a restart should also give
		// back the memory of the previous run.
		s.m = table{}
		s.fences = nil
		s.ops = 0
	}
	m.life.Store(newLife(m.life.Load().epoch + 1)) // Restart is serialised by the shard locks
	for i := range m.shards {
		m.shards[i].mu.Unlock()
	}
}

// Len returns the number of live (unexpired) lock keys; fencing counters are
// not counted (see Fence). It walks every key, so it is meant for tests ("no
// key is left on the master").
func (m *Master) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		now := monotime()
		for j := range s.m.slots {
			if sl := &s.m.slots[j]; sl.h != 0 && sl.e.expires > now {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// Get returns the value key holds, if it holds one that has not expired (a
// key that holds readers holds no value; see Readers).
func (m *Master) Get(key string) (value string, ok bool) {
	s, h := m.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m.get(key, h)
	if !ok || e.expires <= monotime() || e.rd != nil {
		return "", false
	}
	return e.value, true
}

// Fence returns key's fencing count (field "n" of what Redis would hold
// under transport.FenceKey(key)), or 0 if it has none.
func (m *Master) Fence(key string) int64 {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fences[key].n
}

// FenceOwner returns the owner of key's fencing counter: the value of the
// lock that last set it, or "" if it has none.
func (m *Master) FenceOwner(key string) string {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fences[key].owner
}

// Transport returns a new client handle on m. Each handle can be closed
// independently; closing it leaves the master and every other handle alone.
func (m *Master) Transport() transport.Transport {
	return &client{m: m, errClosed: fmt.Errorf("%s: %w", m.name, transport.ErrClosed)}
}

// hash is key's hash for its shard (the low shardBits) and its slot in the
// shard's table (the bits above). It is never 0, which marks an empty slot;
// the top bit it sets is far above any slot index a table can have.
func (m *Master) hash(key string) uint64 { return maphash.String(m.seed, key) | 1<<63 }

func (m *Master) shardIndex(key string) int { return int(m.hash(key) & (numShards - 1)) }

func (m *Master) shard(key string) *shard { s, _ := m.locate(key); return s }

// locate returns key's shard and hash, hashing key once.
func (m *Master) locate(key string) (*shard, uint64) {
	h := m.hash(key)
	return &m.shards[h&(numShards-1)], h
}

// apply runs one valid op and returns its OK and, for AcquireFenced, its
// token. The key and value strings are stored as given, not copied: Go
// strings are immutable, so sharing them is safe and keeps a lock operation
// free of allocations.
func (m *Master) apply(op *transport.Op, now int64) (bool, int64) {
	if len(op.Keys) > 1 {
		return m.applyMulti(op, now), 0
	}
	if op.Kind.Shared() {
		return m.applyShared(op, now), 0
	}
	// One key (len(op.Keys) == 1 means Keys[0] == Key, which transport.Check
	// ensured): the single-key path, whose semantics are the same.
	s, h := m.locate(op.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick(now)
	i := s.m.find(op.Key, h)
	var e entry
	if i >= 0 {
		e = s.m.slots[i].e
	}
	found := i >= 0
	live := found && e.expires > now
	switch op.Kind {
	case transport.Acquire, transport.AcquireFenced:
		if live {
			return false, 0
		}
		ne := entry{value: op.Value, expires: deadline(now, op.TTL)}
		if found {
			s.m.slots[i].e = ne
		} else {
			s.m.add(op.Key, h, ne)
		}
		if op.Kind == transport.Acquire {
			return true, 0
		}
		if s.fences == nil {
			s.fences = make(map[string]fence)
		}
		n := s.fences[op.Key].n + 1
		s.fences[op.Key] = fence{n: n, owner: op.Value}
		return true, n
	case transport.Release:
		if found && (!live || e.value == op.Value) {
			s.m.removeAt(i) // an expired entry goes too: it is absent anyway
		}
		return live && e.value == op.Value, 0
	case transport.Extend:
		if !live {
			if found {
				s.m.removeAt(i)
			}
			return false, 0
		}
		if e.value != op.Value {
			return false, 0
		}
		s.m.slots[i].e.expires = deadline(now, op.TTL)
		return true, 0
	case transport.RaiseFence:
		f := s.fences[op.Key] // a nil map reads as the zero counter
		switch {
		case f.n < op.Token:
			if s.fences == nil {
				s.fences = make(map[string]fence)
			}
			s.fences[op.Key] = fence{n: op.Token, owner: op.Value}
			return true, 0
		case f.n == op.Token && f.owner == op.Value:
			return true, 0
		}
		return false, 0 // a newer grant's count, or this count owned by another lock
	}
	return false, 0 // unreachable: transport.Check let only the five kinds through
}

// applyMulti runs a valid Acquire, Release or Extend over op.Keys atomically:
// it holds every shard the keys fall in, taken in ascending index order (the
// order Restart takes them in too), so no two callers can deadlock. The
// shards are a bitmask rather than a sorted slice, which dedups them and
// keeps the op free of allocations.
func (m *Master) applyMulti(op *transport.Op, now int64) bool {
	var set uint64
	for _, k := range op.Keys {
		set |= 1 << m.shardIndex(k)
	}
	for b := set; b != 0; b &= b - 1 {
		m.shards[bits.TrailingZeros64(b)].mu.Lock()
	}
	defer func() {
		for b := set; b != 0; b &= b - 1 {
			m.shards[bits.TrailingZeros64(b)].mu.Unlock()
		}
	}()
	for b := set; b != 0; b &= b - 1 {
		m.shards[bits.TrailingZeros64(b)].tick(now)
	}
	switch op.Kind {
	case transport.Acquire:
		// All or nothing: set the keys only if none of them is live.
		for _, k := range op.Keys {
			if _, live := m.lookup(k, now); live {
				return false
			}
		}
		e := entry{value: op.Value, expires: deadline(now, op.TTL)}
		for _, k := range op.Keys {
			s, h := m.locate(k)
			s.m.put(k, h, e)
		}
		return true
	case transport.Release:
		// Each key on its own: delete every key that holds the value, and
		// report whether that was all of them. A key listed twice is
		// deleted the first time and missing the second, so the op is not
		// OK, exactly as with the Redis script.
		deleted := 0
		for _, k := range op.Keys {
			s, h := m.locate(k)
			e, found := s.m.get(k, h)
			live := found && e.expires > now
			if found && (!live || e.value == op.Value) {
				s.m.del(k, h)
			}
			if live && e.value == op.Value {
				deleted++
			}
		}
		return deleted == len(op.Keys)
	case transport.Extend:
		// All or nothing: extend only if every key holds the value; a
		// missing key is never re-created.
		for _, k := range op.Keys {
			if e, live := m.lookup(k, now); !live || e.value != op.Value {
				return false
			}
		}
		exp := deadline(now, op.TTL)
		for _, k := range op.Keys {
			s, h := m.locate(k)
			s.m.put(k, h, entry{value: op.Value, expires: exp})
		}
		return true
	}
	return false // unreachable: transport.Check rejects fenced ops with Keys
}

// lookup returns key's entry and whether it is live. The caller holds the
// key's shard.
func (m *Master) lookup(key string, now int64) (entry, bool) {
	s, h := m.locate(key)
	e, found := s.m.get(key, h)
	return e, found && e.expires > now
}

// tick counts an operation on s, which the caller holds, and sweeps every
// sweepEvery-th time.
func (s *shard) tick(now int64) {
	if s.ops++; s.ops%sweepEvery == 0 && s.m.n > sweepFloor {
		s.sweep(now)
	}
}

// deadline is now+ttl, saturating so that an absurd ttl means "forever"
// instead of wrapping into the past. now is negative inside a synctest
// bubble (its clock starts in 2000, before base), where MaxInt64-now would
// itself overflow; MaxInt64-ttl cannot.
func deadline(now int64, ttl time.Duration) int64 {
	if ttl > 0 && now > math.MaxInt64-int64(ttl) {
		return math.MaxInt64
	}
	return now + int64(ttl)
}

// sweep deletes expired entries from the next stretch of the shard's table
// (table.sweepRound walks it round and round from where the last sweep
// stopped), and gives back the memory of a table left mostly empty.
func (s *shard) sweep(now int64) {
	defer s.m.shrink()
	for range sweepRounds {
		seen, expired := s.m.sweepRound(now, sweepSample)
		if expired*4 <= seen {
			return
		}
	}
}

// client is one handle on a Master.
type client struct {
	m         *Master
	closed    atomic.Bool
	errClosed error // built once, so Do after Close does not allocate per call
}

var (
	// (Master.Transport's return type checks transport.Transport.)
	_ transport.ServerReporter = (*client)(nil)
	_ transport.Namer          = (*client)(nil)
	_ transport.Capabler       = (*client)(nil)
)

// Do applies ops in order. The master answers synchronously, so ctx is only
// checked once, up front: once an op has started it finishes within
// microseconds, and stopping midway would only turn definite answers into
// errors.
//
// The clock is read once per call, not per op (a clock read was 4 % of the
// CPU of a lock cycle at 256 lockers): every op of the batch runs as of
// that instant, which is after the caller sent the batch. So a key set or
// extended here still lives at least its TTL from the send, the guarantee a
// lock's validity counts on; an op that runs a little later than the instant
// can only find a key that expired meanwhile still there (a SET refused, a
// release or extend of its own value let through, as if the op had run at
// the instant), never miss a live one.
func (c *client) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	if len(results) != len(ops) {
		return transport.Fail(results, fmt.Errorf("%s: %w: %d ops but %d results",
			c.m.name, transport.ErrInvalidOp, len(ops), len(results)))
	}
	if c.closed.Load() {
		return transport.Fail(results, c.errClosed)
	}
	if err := ctx.Err(); err != nil {
		return transport.Fail(results, fmt.Errorf("%s: %w", c.m.name, err))
	}
	now := monotime()
	for i := range ops {
		if err := transport.Check(&ops[i]); err != nil {
			results[i] = transport.Result{Err: err}
			continue
		}
		ok, token := c.m.apply(&ops[i], now)
		results[i] = transport.Result{OK: ok, Token: token}
	}
	return nil
}

// Close stops this handle; the master and its keys are unaffected. Close is
// idempotent and always returns nil.
func (c *client) Close() error {
	c.closed.Store(true)
	return nil
}

// ServerInfo reports the run id and uptime of the master's current run.
func (c *client) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	if err := c.usable(ctx); err != nil {
		return transport.ServerInfo{}, err
	}
	l := c.m.life.Load()
	return transport.ServerInfo{RunID: l.runID, Uptime: time.Since(l.started)}, nil
}

// Epoch changes when the master restarts (Master.Restart), and only then;
// every client handle of the master sees the same epoch. A handle has no
// connection of its own to lose, so a restart is the only event that can put
// it in front of a master that forgot its keys. The epoch and the run id are
// published together, so a ServerInfo called after reading an epoch
// describes the run that epoch stands for, or a later one.
func (c *client) Epoch() uint64 { return c.m.life.Load().epoch }

// Immediate reports true: a memory master is in this process, and Do only
// takes a shard's lock around each op, so the engine may run it on a
// caller's goroutine (transport.Immediate).
func (c *client) Immediate() bool { return true }

// Name returns the master's name.
func (c *client) Name() string { return c.m.name }

// Capabilities: a memory master has every optional op (fencing, multi-key,
// the read-write ops).
func (c *client) Capabilities() transport.Capabilities {
	return transport.Fencing | transport.MultiKey | transport.Shared
}

func (c *client) usable(ctx context.Context) error {
	if c.closed.Load() {
		return c.errClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", c.m.name, err)
	}
	return nil
}
