// Package memory is an in-process master: the default master of the lock
// engine when no Redis is configured, and a fast, deterministic stand-in for
// one in tests.
//
// A Master keeps Redis's semantics for the three lock operations (SET NX PX,
// compare-and-delete, compare-and-pexpire), including real expiry on the
// monotonic clock. It starts no goroutines: expired keys are treated as absent
// when touched and are swept a few at a time by the operations themselves,
// the way Redis samples keys for active expiry, so memory stays bounded by the
// live keys plus a fraction of them, not by every key ever written.
//
// Each call to Master.Transport returns an independent client handle: closing
// one only stops that handle, the keys stay on the master, just as closing a
// Redis connection does not delete its keys. Master.Restart simulates a master
// process restarting without persistence.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock/transport"
)

const (
	numShards = 64 // a power of two, so a hash picks a shard with a mask

	// Every sweepEvery-th operation on a shard samples up to sweepSample of
	// its entries and deletes the expired ones, repeating (at most
	// sweepRounds times) while more than a quarter of a sample had expired.
	// Removing up to 80 entries per 8 operations outpaces any insert rate, so
	// expired entries settle at roughly a quarter of the live ones, while no
	// operation pays for more than 80 map slots under the shard lock.
	sweepEvery  = 8
	sweepSample = 20
	sweepRounds = 4
)

// base anchors the monotonic nanoseconds stored as expiry times; int64
// nanoseconds since process start are cheaper to store and compare than
// time.Time and never see wall-clock steps.
var base = time.Now()

func monotime() int64 { return int64(time.Since(base)) }

type entry struct {
	value   string
	expires int64 // monotime() at which the key is gone
}

type shardState struct {
	mu  sync.Mutex
	m   map[string]entry
	ops uint32 // operations since the last sweep decision; wraps harmlessly
}

// shard is padded to a cache line so that hot shards do not slow their
// neighbours through false sharing of their mutexes.
type shard struct {
	shardState
	_ [64 - unsafe.Sizeof(shardState{})%64]byte
}

// life is what Restart replaces: the identity and start time of one run of
// the master.
type life struct {
	runID   string
	started time.Time
}

// Master is an in-process master with real TTL semantics; safe for concurrent
// use. The zero value is not usable; call New or NewNamed.
type Master struct {
	name   string
	seed   maphash.Seed
	life   atomic.Pointer[life]
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
	for i := range m.shards {
		m.shards[i].m = make(map[string]entry)
	}
	m.life.Store(newLife())
	return m
}

func newLife() *life {
	// Redis's run_id is 40 hex digits (20 random bytes); matching its shape
	// keeps log lines and the engine's quarantine messages uniform.
	return &life{runID: randomHex(20), started: time.Now()}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails since Go 1.24: it crashes the program instead
	return hex.EncodeToString(b)
}

// Restart simulates the master process restarting without persistence: every
// key is forgotten, the run id changes and the uptime starts again from 0.
// Operations running concurrently land on either side of the restart, key by
// key, as they would against a real master that restarts under load; the new
// run id is published only after every key is gone, so whoever sees it cannot
// see a key from the previous run.
func (m *Master) Restart() {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		// A fresh map, not clear(): a Go map never shrinks, and a restart
		// should also give back the memory of the previous run.
		s.m = make(map[string]entry)
		s.ops = 0
		s.mu.Unlock()
	}
	m.life.Store(newLife())
}

// Len returns the number of live (unexpired) keys. It walks every key, so it
// is meant for tests ("no key is left on the master").
func (m *Master) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		now := monotime()
		for _, e := range s.m {
			if e.expires > now {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// Get returns the value key holds, if it holds one that has not expired.
func (m *Master) Get(key string) (value string, ok bool) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok || e.expires <= monotime() {
		return "", false
	}
	return e.value, true
}

// Transport returns a new client handle on m. Each handle can be closed
// independently; closing it leaves the master and every other handle alone.
func (m *Master) Transport() transport.Transport {
	return &client{m: m, errClosed: fmt.Errorf("%s: %w", m.name, transport.ErrClosed)}
}

func (m *Master) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)&(numShards-1)]
}

// apply runs one valid op. The key and value strings are stored as given, not
// copied: Go strings are immutable, so sharing them is safe and keeps a lock
// operation free of allocations.
func (m *Master) apply(op *transport.Op) bool {
	s := m.shard(op.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := monotime()
	if s.ops++; s.ops%sweepEvery == 0 {
		s.sweep(now)
	}
	e, found := s.m[op.Key]
	live := found && e.expires > now
	switch op.Kind {
	case transport.Acquire:
		if live {
			return false
		}
		s.m[op.Key] = entry{value: op.Value, expires: deadline(now, op.TTL)}
		return true
	case transport.Release:
		if found && (!live || e.value == op.Value) {
			delete(s.m, op.Key) // an expired entry goes too: it is absent anyway
		}
		return live && e.value == op.Value
	case transport.Extend:
		if !live {
			if found {
				delete(s.m, op.Key)
			}
			return false
		}
		if e.value != op.Value {
			return false
		}
		s.m[op.Key] = entry{value: e.value, expires: deadline(now, op.TTL)}
		return true
	}
	return false // unreachable: transport.Check let only the three kinds through
}

// deadline is now+ttl, saturating so that an absurd ttl means "forever"
// instead of wrapping into the past.
func deadline(now int64, ttl time.Duration) int64 {
	if int64(ttl) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(ttl)
}

// sweep deletes expired entries from a random sample of the shard. Go map
// iteration starts at a random position, which is what makes a bounded scan a
// sample rather than always the same first entries.
func (s *shard) sweep(now int64) {
	for range sweepRounds {
		seen, expired := 0, 0
		for k, e := range s.m {
			if e.expires <= now {
				delete(s.m, k)
				expired++
			}
			if seen++; seen == sweepSample {
				break
			}
		}
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
	_ transport.Transport    = (*client)(nil)
	_ transport.InfoReporter = (*client)(nil)
	_ transport.Pinger       = (*client)(nil)
	_ transport.Namer        = (*client)(nil)
)

// Do applies ops in order. The master answers synchronously, so ctx is only
// checked once, up front: once an op has started it finishes within
// microseconds, and stopping midway would only turn definite answers into
// errors.
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
	for i := range ops {
		if err := transport.Check(&ops[i]); err != nil {
			results[i] = transport.Result{Err: err}
			continue
		}
		results[i] = transport.Result{OK: c.m.apply(&ops[i])}
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

// Ping succeeds unless the handle is closed or ctx is done: an in-process
// master always answers.
func (c *client) Ping(ctx context.Context) error { return c.usable(ctx) }

// Name returns the master's name.
func (c *client) Name() string { return c.m.name }

func (c *client) usable(ctx context.Context) error {
	if c.closed.Load() {
		return c.errClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", c.m.name, err)
	}
	return nil
}
