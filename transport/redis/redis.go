// Package redis is the transport to one Redis master, on one connection
// whose I/O it owns (radix v4 decodes the replies).
//
// One connection per master is deliberate: it is one ordered stream, so the
// engine's per-key ordering (a release never overtakes the SET it cleans up)
// holds without any routing, and concurrent batches pipeline on it. Each
// batch goes out as one write of its encoded commands; one reader goroutine
// per connection reads the replies.
//
// The transport never makes the engine wait for a master that is down: it
// connects in the background and, while it has no connection, fails every
// batch at once with an error wrapping transport.ErrUnavailable, retrying the
// connection with randomized exponential backoff.
package redis

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/transport"
)

// The scripts are the ones every Redlock client uses, byte for byte, so that
// their SHA1s match and other clients' releases work on our keys and ours on
// theirs.
const (
	ReleaseScript = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	ExtendScript  = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`
)

// The scripts of the fenced and multi-key ops. Single-key Acquire, Release
// and Extend never use them: those keep plain SET NX PX and the two standard
// scripts above, so their cost and wire format are what they always were.
//
// Redis Cluster: each of these scripts touches several keys, which Redis
// Cluster only allows when they hash to one slot (else CROSSSLOT). This
// transport talks to one node and does no slot routing, so it does not
// support pointing fenced or multi-key ops at a cluster node, unless the keys
// share a hash tag: a lock key "{order:42}" and its counter
// transport.FenceKey("{order:42}") = "redlock-fence:{order:42}" hash alike,
// since transport.FencePrefix has no braces; multi-key ops need all their
// keys to share one tag likewise.
const (
	// AcquireFencedScript is SET NX PX and, only if the key was set, the
	// increment of the key's fencing counter (no expiry), which the lock's
	// value then owns, in the same atomic step. The counter is a hash:
	// field "n" the count, "o" its owner (see transport.RaiseFence).
	// KEYS[1] is the lock key, KEYS[2] transport.FenceKey(KEYS[1]); ARGV is
	// value, ttl in ms. It returns the new count, or nil when the key was
	// held: an integer reply always means the lock was set.
	AcquireFencedScript = `if not redis.call("set",KEYS[1],ARGV[1],"NX","PX",ARGV[2]) then return false end local F = KEYS[2] ` +
		upgradeCounter + `local n = redis.call("hincrby",F,"n",1) redis.call("hset",F,"o",ARGV[1]) return n`
	// RaiseFenceScript is the write-back of token ARGV[1] by the lock with
	// value ARGV[2] to the counter KEYS[1]. It returns 1 when the count is
	// below the token (it then sets count and owner) or equal to it and
	// owned by this value (no change), else 0; it never lowers the count.
	// A count that is not a number fails the script. Lua compares as
	// doubles, which is exact for every token below 2^53.
	RaiseFenceScript = `local F = KEYS[1] ` + upgradeCounter +
		`local c = redis.call("hget",F,"n") local t = tonumber(ARGV[1]) local n = 0 ` +
		`if c then n = tonumber(c) if n == nil then return redis.error_reply("fencing counter " .. F .. " is not a number") end end ` +
		`if n < t then redis.call("hset",F,"n",ARGV[1],"o",ARGV[2]) return 1 end ` +
		`if n == t and redis.call("hget",F,"o") == ARGV[2] then return 1 end return 0`
	// AcquireMultiScript sets every key in KEYS to ARGV[1] with PX ARGV[2]
	// if none of them exists, and returns 1; else it sets nothing and
	// returns 0.
	AcquireMultiScript = `for i = 1, #KEYS do if redis.call("exists",KEYS[i]) == 1 then return 0 end end ` +
		`for i = 1, #KEYS do redis.call("set",KEYS[i],ARGV[1],"PX",ARGV[2]) end return 1`
	// ReleaseMultiScript deletes each key in KEYS that holds ARGV[1] and
	// returns 1 if that was every key (a key listed twice is not deleted
	// twice, so it makes the result 0), else 0.
	ReleaseMultiScript = `local n = 0 for i = 1, #KEYS do if redis.call("get",KEYS[i]) == ARGV[1] then n = n + redis.call("del",KEYS[i]) end end ` +
		`if n == #KEYS then return 1 else return 0 end`
	// ExtendMultiScript sets PX ARGV[2] on every key in KEYS if every one
	// holds ARGV[1], and returns 1; else it changes nothing and returns 0.
	// A missing key is never re-created.
	ExtendMultiScript = `for i = 1, #KEYS do if redis.call("get",KEYS[i]) ~= ARGV[1] then return 0 end end ` +
		`for i = 1, #KEYS do redis.call("pexpire",KEYS[i],ARGV[2]) end return 1`
)

// upgradeCounter turns the counter F (a Lua local of the script using it),
// if an earlier version left it as a plain string (the count alone), into
// the hash with the same count and no owner: an upgrade keeps every count
// (none is lost or lowered), and no lock can claim an ownership it never
// had. Clients of the earlier version then fail on the hash (WRONGTYPE)
// rather than misread it: their fenced ops report errors, which is safe.
const upgradeCounter = `if redis.call("type",F).ok == "string" then ` +
	`local c = redis.call("get",F) redis.call("del",F) redis.call("hset",F,"n",c) end `

// scriptID names one of the scripts, loaded on every connection.
type scriptID uint8

const (
	scriptRelease scriptID = iota
	scriptExtend
	scriptAcquireFenced
	scriptRaiseFence
	scriptAcquireMulti
	scriptReleaseMulti
	scriptExtendMulti
	scriptAcquireShared
	scriptReleaseShared
	scriptExtendShared
	scriptAcquireExclusive
	scriptReleaseBatch
	scriptExtendBatch
	numScripts
)

var scripts = [numScripts]struct{ src, sha string }{
	scriptRelease:       {ReleaseScript, sha1Hex(ReleaseScript)},
	scriptExtend:        {ExtendScript, sha1Hex(ExtendScript)},
	scriptAcquireFenced: {AcquireFencedScript, sha1Hex(AcquireFencedScript)},
	scriptRaiseFence:    {RaiseFenceScript, sha1Hex(RaiseFenceScript)},
	scriptAcquireMulti:  {AcquireMultiScript, sha1Hex(AcquireMultiScript)},
	scriptReleaseMulti:  {ReleaseMultiScript, sha1Hex(ReleaseMultiScript)},
	scriptExtendMulti:   {ExtendMultiScript, sha1Hex(ExtendMultiScript)},

	scriptAcquireShared:    {AcquireSharedScript, sha1Hex(AcquireSharedScript)},
	scriptReleaseShared:    {ReleaseSharedScript, sha1Hex(ReleaseSharedScript)},
	scriptExtendShared:     {ExtendSharedScript, sha1Hex(ExtendSharedScript)},
	scriptAcquireExclusive: {AcquireExclusiveScript, sha1Hex(AcquireExclusiveScript)},
	scriptReleaseBatch:     {ReleaseBatchScript, sha1Hex(ReleaseBatchScript)},
	scriptExtendBatch:      {ExtendBatchScript, sha1Hex(ExtendBatchScript)},
}

// scriptOf returns the script a valid op runs as, or false for a plain SET
// (single-key Acquire). A multi-key op with one key is the single-key op.
func scriptOf(op *transport.Op) (scriptID, bool) {
	multi := len(op.Keys) > 1
	switch op.Kind {
	case transport.Acquire:
		return scriptAcquireMulti, multi
	case transport.Release:
		if multi {
			return scriptReleaseMulti, true
		}
		return scriptRelease, true
	case transport.Extend:
		if multi {
			return scriptExtendMulti, true
		}
		return scriptExtend, true
	case transport.AcquireFenced:
		return scriptAcquireFenced, true
	case transport.RaiseFence:
		return scriptRaiseFence, true
	case transport.AcquireShared, transport.ReleaseShared, transport.ExtendShared, transport.AcquireExclusive:
		return sharedScript(op.Kind), true
	}
	return 0, false
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

var (
	_ transport.Transport      = (*Transport)(nil)
	_ transport.ServerReporter = (*Transport)(nil)
	_ transport.Namer          = (*Transport)(nil)
	_ transport.Capabler       = (*Transport)(nil)
)

// errConnClosed is the reason recorded when a connection is closed without
// an I/O error of its own.
var errConnClosed = errors.New("connection closed")

// Transport is one Redis master. It is safe for concurrent use.
type Transport struct {
	cfg       resolved
	name      string
	netDialer netDialer
	errClosed error

	loopCtx    context.Context // ended by Close; bounds dials
	loopCancel context.CancelFunc
	loopDone   chan struct{}

	firstDone chan struct{} // closed after the first connection attempt
	firstErr  error         // its error; written before firstDone is closed
	// handshaking is set while a dial is connected and in its TLS
	// handshake, so that a Dial whose ctx ends then can say so.
	handshaking atomic.Bool

	mu      sync.Mutex
	closed  bool
	cs      *connState // nil while disconnected
	downErr error      // why cs is nil; wraps transport.ErrUnavailable
	// inflight counts Do/Ping/ServerInfo calls and the goroutines they
	// start, so Close can wait for all of them. Add is only called under mu
	// with closed false, or while the caller already holds a count.
	inflight sync.WaitGroup

	// epoch counts successful connections; see Epoch. It is bumped under
	// mu in install before the connection is published to enter.
	epoch    atomic.Uint64
	connects atomic.Int64 // successful connections, for tests
}

type netDialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// connState is one connection and its fate.
type connState struct {
	t        *Transport
	p        *pipe
	broken   atomic.Bool
	brokenCh chan struct{} // closed when broken is set
	ioErr    atomic.Pointer[error]
}

// New validates cfg and returns a transport that connects in the background;
// the master need not be up. Do, Ping and ServerInfo wait (within their ctx)
// for the first connection attempt; when that failed, and whenever the
// connection is lost, they fail at once with an error wrapping
// transport.ErrUnavailable.
func New(cfg Config) (*Transport, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:       r,
		name:      r.hostport,
		loopDone:  make(chan struct{}),
		firstDone: make(chan struct{}),
	}
	t.errClosed = fmt.Errorf("%w: redis %s", transport.ErrClosed, t.name)
	t.downErr = fmt.Errorf("%w: redis %s: connecting", transport.ErrUnavailable, t.name)
	nd := &net.Dialer{Timeout: r.DialTimeout, KeepAlive: keepAlive}
	t.netDialer = nd
	if r.TLS {
		var tc *tls.Config
		if r.TLSConfig != nil {
			tc = r.TLSConfig.Clone()
		} else {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if tc.ServerName == "" {
			tc.ServerName = r.serverName
		}
		t.netDialer = tlsDialer{nd: nd, cfg: tc, handshaking: &t.handshaking}
	}
	t.loopCtx, t.loopCancel = context.WithCancel(context.Background())
	go t.connectLoop()
	return t, nil
}

// Dial is New, then waits for the first connection attempt. If it fails,
// or ctx ends first, the transport is closed and the error returned.
func Dial(ctx context.Context, cfg Config) (*Transport, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.firstDone:
		if t.firstErr != nil {
			t.Close()
			return nil, t.firstErr
		}
		return t, nil
	case <-ctx.Done():
		err := ctx.Err()
		if t.handshaking.Load() {
			err = handshakeErr(t.name, err)
		}
		t.Close()
		return nil, fmt.Errorf("%w: redis %s: dial: %w", transport.ErrUnavailable, t.name, err)
	}
}

// Name is the master's normalised host:port.
func (t *Transport) Name() string { return t.name }

// Close stops reconnecting, closes the connection and waits for every
// goroutine the transport started. Close is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.loopCancel()
	<-t.loopDone
	// The loop has closed the connection, so every call waiting on it
	// returns now.
	t.inflight.Wait()
	return nil
}

// enter registers a call, which must then call t.inflight.Done, and returns
// the current connection, or nil and the reason there is none. ok is false,
// and nothing registered, once the transport is closed.
func (t *Transport) enter() (cs *connState, down error, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, false
	}
	t.inflight.Add(1)
	return t.cs, t.downErr, true
}

// connectLoop owns the connection: it dials, waits until the connection
// breaks or the transport closes, closes it, and dials again.
func (t *Transport) connectLoop() {
	defer close(t.loopDone)
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(t.cfg.ReconnectInitial),
		backoff.WithMaxInterval(t.cfg.ReconnectMax),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0),
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	first := true
	for {
		cs, err := t.dial()
		if err == nil && !t.install(cs) {
			cs.p.close()
			err = errConnClosed
		}
		if first {
			t.firstErr = err
			close(t.firstDone)
			first = false
		}
		if err != nil {
			if t.loopCtx.Err() != nil {
				return
			}
			timer.Reset(bo.NextBackOff())
			select {
			case <-t.loopCtx.Done():
				return
			case <-timer.C:
			}
			continue
		}
		bo.Reset()
		select {
		case <-t.loopCtx.Done():
			cs.p.close()
			return
		case <-cs.brokenCh:
			// Closing here rather than in broken: broken runs on the
			// connection's reader, which close waits for.
			cs.p.close()
		}
	}
}

// dial makes one connection: TCP or TLS, then AUTH, SELECT and SCRIPT LOAD
// of every script in one round trip (setup), so that the EVALSHAs of the
// first batch find them. The error wraps transport.ErrUnavailable and is
// recorded as the reason.
func (t *Transport) dial() (*connState, error) {
	ctx, cancel := context.WithTimeout(t.loopCtx, t.cfg.DialTimeout)
	defer cancel()
	cs := &connState{t: t, brokenCh: make(chan struct{})}
	nc, err := (hookDialer{base: t.netDialer, cs: cs}).DialContext(ctx, "tcp", t.name)
	if err == nil {
		cs.p = newPipe(nc, t.cfg.WriteFlushInterval, func(err error) { t.broken(cs, err) })
		if err = setup(ctx, cs.p, &t.cfg); err != nil {
			cs.p.close()
			err = fmt.Errorf("setting up the connection: %w", err)
		}
	}
	if err != nil {
		err = fmt.Errorf("%w: redis %s: %w", transport.ErrUnavailable, t.name, err)
		t.mu.Lock()
		t.downErr = err
		t.mu.Unlock()
		return nil, err
	}
	return cs, nil
}

// install makes cs the current connection, unless it broke already or the
// transport closed meanwhile. The epoch changes first, in the same critical
// section: enter hands cs out only under mu, so no call can run on cs before
// the new epoch is visible.
func (t *Transport) install(cs *connState) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || cs.broken.Load() {
		return false
	}
	t.epoch.Add(1)
	t.cs = cs
	t.connects.Add(1)
	return true
}

// Epoch counts the connections the transport has made: it changes each time
// it reconnects, which it must after the master process restarted (the old
// TCP connection dies with it). It is 0 until the first connection.
//
// The new epoch is visible before the new connection serves any call, so a
// Do served by a new connection is followed by an Epoch that differs from
// one read before that Do. Each Do runs on one connection (its NOSCRIPT
// resend included), so an Epoch that reads E both before and after a Do
// means the Do ran on the connection of epoch E, to that one master process.
// (A proxy between us and Redis that keeps our connection while it
// reconnects upstream defeats this, as it defeats any client-side
// detection.)
func (t *Transport) Epoch() uint64 { return t.epoch.Load() }

// Capabilities: the Redis transport implements every op, with scripts for
// the fencing counters, the multi-key forms and the read-write ops
// (shared.go).
func (t *Transport) Capabilities() transport.Capabilities {
	return transport.Fencing | transport.MultiKey | transport.Shared
}

// broken retires cs after a connection-level failure: later calls fail fast
// and the loop closes it and reconnects. Only the first call for a cs counts.
func (t *Transport) broken(cs *connState, reason error) {
	if !cs.broken.CompareAndSwap(false, true) {
		return
	}
	t.mu.Lock()
	if t.cs == cs {
		t.cs = nil
		t.downErr = fmt.Errorf("%w: redis %s: connection lost: %w", transport.ErrUnavailable, t.name, reason)
	}
	t.mu.Unlock()
	close(cs.brokenCh)
}

// tlsDialer connects over TCP and then does the TLS handshake itself (where
// tls.Dialer does both), so that a handshake that does not complete can be
// told from a connection that could not be made: a rediss:// address of a
// plain port connects, and then redis-server, which takes the ClientHello
// for the start of an inline command, waits for its end in silence until
// the dial's deadline passes, which alone says nothing.
type tlsDialer struct {
	nd          *net.Dialer
	cfg         *tls.Config  // its ServerName set
	handshaking *atomic.Bool // set during the handshake
}

func (d tlsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := d.nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, d.cfg)
	d.handshaking.Store(true)
	err = c.HandshakeContext(ctx)
	d.handshaking.Store(false)
	if err != nil {
		raw.Close()
		return nil, handshakeErr(addr, err)
	}
	return c, nil
}

// handshakeErr describes a TLS handshake with addr that failed with err.
// A server that never answered the ClientHello, closed or reset the
// connection on it, or answered with something other than TLS, is most
// likely no TLS server at all: say so, and what to use instead. (A
// certificate that does not verify is a TLS server's answer, and its
// error says so itself.)
func handshakeErr(addr string, err error) error {
	var (
		rh tls.RecordHeaderError
		op *net.OpError // a reset or broken pipe (syscall.ECONNRESET is not on every platform)
	)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.As(err, &op) || errors.As(err, &rh) {
		return fmt.Errorf("TLS handshake with %s did not complete: is the server listening for TLS? use redis:// for a plain port: %w", addr, err)
	}
	return fmt.Errorf("TLS handshake with %s: %w", addr, err)
}

// hookDialer wraps the net.Conn so that a connection closed anywhere marks
// its connState broken, with the first I/O error as the reason.
type hookDialer struct {
	base netDialer
	cs   *connState
}

func (d hookDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.base.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: c, cs: d.cs}, nil
}

type hookConn struct {
	net.Conn
	cs *connState
}

// Read and Write remember the first real I/O error, so that the reason
// given for a lost connection is "connection reset" or "EOF" rather than
// just "closed". Deadline errors are a write that gave up, not the
// connection's own failure.
func (c *hookConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.cs.noteIOErr(err)
	}
	return n, err
}

func (c *hookConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.cs.noteIOErr(err)
	}
	return n, err
}

func (c *hookConn) Close() error {
	reason := errConnClosed
	if p := c.cs.ioErr.Load(); p != nil {
		reason = *p
	}
	c.cs.t.broken(c.cs, reason)
	return c.Conn.Close()
}

func (cs *connState) noteIOErr(err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		cs.ioErr.CompareAndSwap(nil, &err)
	}
}

// withDeadline gives ctx the OpTimeout deadline when it has none, so that a
// master that never answers cannot hold a caller forever.
func (t *Transport) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, t.cfg.OpTimeout)
}

// send writes buf (the encoded commands whose replies u reads) on cs and
// waits for the replies or for ctx, whichever is first. After a non-nil
// error, u and done may still be written by the connection's reader (it
// reads late replies to keep the stream in step), so the caller must not
// reuse them. A batch is written before send returns or never (see pipe).
func (t *Transport) send(ctx context.Context, cs *connState, buf []byte, u resp.Unmarshaler, done chan error) error {
	return cs.p.send(ctx, buf, u, done)
}

// callErr describes, for the caller, an error from send.
func (t *Transport) callErr(ctx context.Context, err error) error {
	switch {
	case t.isClosed():
		return t.errClosed
	case errors.Is(err, errNotSent):
		// Before the context's case: errNotSent wraps DeadlineExceeded
		// too, but the master has seen nothing of this batch, and the
		// engine must not take it for a master that did not answer.
		return fmt.Errorf("redis %s: %w", t.name, err)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("redis %s: no answer: %w", t.name, ctx.Err())
	case errors.Is(err, errWriteCut):
		return fmt.Errorf("redis %s: %w", t.name, err)
	case isRespErr(err):
		return fmt.Errorf("redis %s: %w", t.name, err)
	default:
		return fmt.Errorf("%w: redis %s: connection failed: %w", transport.ErrUnavailable, t.name, err)
	}
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func isRespErr(err error) bool {
	return errors.As(err, new(resp3.SimpleError)) || errors.As(err, new(resp3.BlobError))
}

// awaitFirst waits (within ctx) for the first connection attempt of a
// transport just made, rather than failing a call made right after New: the
// engine asks every master for its run id as it starts. Later, while
// reconnecting, calls fail at once.
func (t *Transport) awaitFirst(ctx context.Context) {
	select {
	case <-t.firstDone:
	default:
		select {
		case <-t.firstDone:
		case <-ctx.Done():
		}
	}
}

// exec runs one command outside Do (PING, INFO).
func (t *Transport) exec(ctx context.Context, c *command) error {
	t.awaitFirst(ctx)
	cs, down, ok := t.enter()
	if !ok {
		return t.errClosed
	}
	defer t.inflight.Done()
	if cs == nil {
		return down
	}
	ctx, cancel := t.withDeadline(ctx)
	defer cancel()
	if err := c.run(ctx, cs.p); err != nil {
		return t.callErr(ctx, err)
	}
	return nil
}

// Cmd runs one command outside any batch, on the current connection, and
// unmarshals its reply into rcv (nil discards it). It is for
// administrative reads (the Redis Cluster transport's CLUSTER SLOTS), never
// for lock ops, which go through Do.
func (t *Transport) Cmd(ctx context.Context, rcv any, cmd string, args ...string) error {
	return t.exec(ctx, (&command{rcv: rcv}).cmd(append([]string{cmd}, args...)...))
}

// Ping checks that the master answers. The engine never pings (every batch
// and every ServerInfo read already tells whether the master answers), so
// this is no transport interface; redlock status uses it to time a round
// trip.
func (t *Transport) Ping(ctx context.Context) error {
	var pong string
	if err := t.exec(ctx, (&command{out: &pong}).cmd("PING")); err != nil {
		return err
	}
	if pong != "PONG" {
		return fmt.Errorf("redis %s: PING answered %q", t.name, pong)
	}
	return nil
}

// ServerInfo reads run_id and uptime_in_seconds, the replication role, the
// eviction settings and evicted_keys from INFO (its default sections,
// server, memory, stats and replication among them: INFO with several
// section names needs Redis 7), on the connection that is current when it
// is called, like every other call.
//
// The guarantee, with Epoch: an info fetched after reading epoch E describes
// the process behind epoch E or a later one, never an earlier one (the
// connection of E is installed, under the same lock as E is published, before
// ServerInfo picks its connection). If Epoch still reads E after ServerInfo
// returned, the info describes exactly the process behind E.
func (t *Transport) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	var info string
	if err := t.exec(ctx, (&command{out: &info}).cmd("INFO")); err != nil {
		if !isRespErr(err) {
			return transport.ServerInfo{}, err
		}
		// An error reply: the master is up (transport.ErrReply).
		if strings.Contains(err.Error(), "NOPERM") {
			// INFO is in ACL category @dangerous, which hardened users
			// often lack; without it the engine cannot vet the master.
			return transport.ServerInfo{}, fmt.Errorf("%w; the engine reads INFO to tell a restarted master, one server listed twice, a replica and an evicting master: grant it (ACL SETUSER <user> +info)", transport.Reply(err))
		}
		return transport.ServerInfo{}, transport.Reply(err)
	}
	return parseServerInfo(t.name, info)
}

func parseServerInfo(name, info string) (transport.ServerInfo, error) {
	var si transport.ServerInfo
	var haveUptime bool
	var role, masterHost, masterPort, policy string
	var maxmemory int64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			si.RunID = v
		case "uptime_in_seconds":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return si, fmt.Errorf("redis %s: INFO: uptime_in_seconds %q: %w", name, v, err)
			}
			// uptime_in_seconds is the difference of two truncated
			// wall-clock seconds: it reads 1 a few milliseconds after a
			// start that fell just before a second boundary. Uptime must
			// never run ahead of the truth (it ends a restart quarantine),
			// so take a second off.
			si.Uptime = time.Duration(max(n-1, 0)) * time.Second
			haveUptime = true
		case "role":
			role = v
		case "master_host":
			masterHost = v
		case "master_port":
			masterPort = v
		case "maxmemory":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return si, fmt.Errorf("redis %s: INFO: maxmemory %q: %w", name, v, err)
			}
			maxmemory = n
		case "maxmemory_policy":
			policy = v
		case "evicted_keys":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return si, fmt.Errorf("redis %s: INFO: evicted_keys %q: %w", name, v, err)
			}
			si.Evicted = n
		}
	}
	if si.RunID == "" || !haveUptime {
		return si, fmt.Errorf("redis %s: INFO has no run_id or uptime_in_seconds", name)
	}
	if role != "" && role != "master" {
		si.ReplicaOf = net.JoinHostPort(masterHost, masterPort)
	}
	// Without a limit nothing is evicted (a 32-bit server has an implicit
	// limit, and noeviction with it by default).
	if maxmemory > 0 && policy != "" && policy != "noeviction" {
		si.Eviction = fmt.Sprintf("maxmemory-policy %s with maxmemory %d bytes", policy, maxmemory)
	}
	return si, nil
}
