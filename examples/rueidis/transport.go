// Package rueidistransport is a redlock transport on github.com/redis/rueidis:
// the engine talks to each Redis master through one rueidis client, over one
// auto-pipelined connection.
//
// It is an example of a plugin written from outside the engine, with the
// public packages only (transport, transporttest, api, engine), in a module of
// its own so that rueidis never enters the engine's go.mod. README.md in this
// directory is the plugin author's guide; this file is the worked example.
//
//	ts := make([]transport.Transport, len(addrs))
//	for i, addr := range addrs {
//		t, err := rueidistransport.New(rueidistransport.Config{Addr: addr})
//		if err != nil { ... }
//		ts[i] = t
//	}
//	locker, err := engine.NewWithTransports(ts)
//
// # Why rueidis, and how it is set up
//
// The batch contract wants the ops of one Do applied in slice order, and a
// later Do to reach the master after an earlier one that returned. rueidis
// queues each DoMulti whole into one ring that one goroutine writes to one
// connection: with PipelineMultiplex -1 there is exactly one such connection
// per master, so batches reach the master in the order they were queued and
// concurrent batches share round trips (auto-pipelining), which is what the
// engine's own radix transport does by hand. The rest of the set-up keeps
// rueidis from doing anything behind the engine's back:
//
//   - DisableRetry: rueidis would resend read-only commands after a network
//     error; the engine decides about every retry itself.
//   - BlockingPipeline at its maximum: a DoMulti of 2000 commands or more
//     would otherwise go to a pooled connection of its own, out of order with
//     the shared one.
//   - AlwaysPipelining: every DoMulti goes through the queue, which honours
//     ctx cancellation (the direct path honours only a deadline).
//   - DisableCache: no client-side caching, no CLIENT TRACKING.
//   - ForceSingleClient: no cluster probing; New works with the master down.
package rueidistransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// Config says how to reach one master.
type Config struct {
	// Addr is the master's host:port.
	Addr string
	// Username and Password authenticate (AUTH / HELLO); empty: none.
	Username, Password string
	// DB is the database SELECTed on connecting.
	DB int
	// TLSConfig, when set, makes the connection TLS.
	TLSConfig *tls.Config
	// DialTimeout bounds one connection attempt, handshake included.
	// Default 1s.
	DialTimeout time.Duration
	// OpTimeout bounds a Do or ServerInfo whose ctx has no deadline.
	// Default 1s.
	OpTimeout time.Duration
	// MaxFlushDelay is rueidis's: the writer waits up to this long after
	// each flush to gather more commands. 0 (the default) flushes at once.
	MaxFlushDelay time.Duration
}

const (
	defaultDialTimeout = time.Second
	defaultOpTimeout   = time.Second
)

// Transport is one Redis master. It is safe for concurrent use.
type Transport struct {
	client    rueidis.Client
	name      string
	opTimeout time.Duration
	errClosed error
	errDown   error

	closed atomic.Bool
	// epoch counts dials: rueidis dials a new connection (lazily, in the
	// goroutine of the call that finds none) after the old one broke, which
	// it does when the master process restarts. See Epoch.
	epoch atomic.Uint64
	// dialStart is when a dial that may still be under way began (unix
	// ns), 0 when none is. Calls that find one younger than dialTimeout fail
	// at once with ErrUnavailable instead of waiting in rueidis for its
	// dial, which would not honour their ctx. (A dial ends within
	// dialTimeout, so an older mark is stale and ignored.)
	dialStart   atomic.Int64
	dialTimeout time.Duration
	// loaded is the epoch whose connection has loaded every script.
	loaded atomic.Uint64
}

var (
	_ transport.Transport      = (*Transport)(nil)
	_ transport.ServerReporter = (*Transport)(nil)
	_ transport.Capabler       = (*Transport)(nil)
	_ transport.Namer          = (*Transport)(nil)
)

// New checks cfg and makes the transport. It tries to connect once (for at
// most DialTimeout) but succeeds with the master down: calls then fail with
// an error wrapping transport.ErrUnavailable until a later call reconnects.
// Bad settings get an *api.Error wrapping api.ErrInvalidArgument.
func New(cfg Config) (*Transport, error) {
	if err := cfg.check(); err != nil {
		return nil, &api.Error{Op: "new", Err: api.ErrInvalidArgument, Detail: "rueidis transport: " + err.Error()}
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = defaultOpTimeout
	}
	t := &Transport{name: cfg.Addr, opTimeout: cfg.OpTimeout, dialTimeout: cfg.DialTimeout}
	t.errClosed = fmt.Errorf("%w: rueidis %s", transport.ErrClosed, t.name)
	t.errDown = fmt.Errorf("%w: rueidis %s: connecting", transport.ErrUnavailable, t.name)
	opt := rueidis.ClientOption{
		InitAddress:       []string{cfg.Addr},
		Username:          cfg.Username,
		Password:          cfg.Password,
		SelectDB:          cfg.DB,
		TLSConfig:         cfg.TLSConfig,
		Dialer:            net.Dialer{Timeout: cfg.DialTimeout},
		DialCtxFn:         t.dial,
		MaxFlushDelay:     cfg.MaxFlushDelay,
		ForceSingleClient: true,
		PipelineMultiplex: -1, // 2^0: one connection
		BlockingPipeline:  math.MaxInt,
		AlwaysPipelining:  true,
		DisableRetry:      true,
		DisableCache:      true,
	}
	e0 := t.epoch.Load()
	client, err := rueidis.NewClient(opt)
	t.settle(e0)
	if client == nil {
		return nil, &api.Error{Op: "new", Err: api.ErrInvalidArgument, Detail: fmt.Sprintf("rueidis transport %s: %v", cfg.Addr, err)}
	}
	// A failed first dial (err != nil with a client) is not fatal: the
	// master may come up later.
	t.client = client
	return t, nil
}

func (c *Config) check() error {
	if c.Addr == "" {
		return errors.New("Addr is empty: want host:port")
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return fmt.Errorf("Addr %q: want host:port", c.Addr)
	}
	if c.DB < 0 {
		return fmt.Errorf("DB %d is negative", c.DB)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", c.DialTimeout}, {"OpTimeout", c.OpTimeout}, {"MaxFlushDelay", c.MaxFlushDelay}} {
		if d.v < 0 {
			return fmt.Errorf("%s %v is negative: want 0 (the default) or more", d.name, d.v)
		}
	}
	return nil
}

// dial is rueidis's DialCtxFn. It runs before the new connection serves
// anything, so the epoch moves before any call can use it.
func (t *Transport) dial(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
	t.epoch.Add(1)
	t.dialStart.Store(time.Now().UnixNano())
	var (
		c   net.Conn
		err error
	)
	if tc != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		t.dialStart.Store(0)
	}
	return c, err
}

// settle ends the dialing state after a call during which a dial began:
// rueidis dials in the goroutine of the call that needs a connection, and
// by the time that call returns the dial (handshake included) is over.
func (t *Transport) settle(before uint64) {
	if t.epoch.Load() != before {
		t.dialStart.Store(0)
	}
}

// dialing reports whether a dial began less than dialTimeout ago and may
// still be under way.
func (t *Transport) dialing() bool {
	start := t.dialStart.Load()
	return start != 0 && time.Since(time.Unix(0, start)) < t.dialTimeout
}

// Name is the master's address, for error messages.
func (t *Transport) Name() string { return t.name }

// Capabilities declares the optional ops: fencing and multi-key locks are
// both implemented (scriptFor, command).
func (t *Transport) Capabilities() transport.Capabilities {
	return transport.Fencing | transport.MultiKey
}

// Epoch changes every time the transport dials the master, which it must
// after the master process restarted (its old connection dies with it).
// rueidis dials only when it has no connection, in the call that needs one,
// and the epoch moves at the start of that dial, before the new connection
// carries any command: so ServerInfo called after Epoch read E describes the
// process behind E or a later one, and a Do between two reads of E ran on
// the connection of E.
func (t *Transport) Epoch() uint64 { return t.epoch.Load() }

// Close closes the client. Calls after it fail with an error wrapping
// transport.ErrClosed. Close is idempotent.
func (t *Transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	t.client.Close()
	return nil
}

// ServerInfo reads run_id and uptime_in_seconds, the role, the eviction
// settings and evicted_keys from INFO's default sections (one INFO with
// several section names needs Redis 7).
func (t *Transport) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	if t.closed.Load() {
		return transport.ServerInfo{}, t.errClosed
	}
	if t.dialing() {
		return transport.ServerInfo{}, t.errDown
	}
	ctx, cancel := t.withDeadline(ctx)
	defer cancel()
	e0 := t.epoch.Load()
	r := t.client.Do(ctx, t.client.B().Info().Build())
	t.settle(e0)
	if err := r.NonRedisError(); err != nil {
		return transport.ServerInfo{}, t.callErr(ctx, err)
	}
	text, err := r.ToString()
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			// Refused (an ACL without +info): the master is up, and the
			// engine shows it reachable, though it cannot vote.
			err = transport.Reply(err)
		}
		return transport.ServerInfo{}, fmt.Errorf("rueidis %s: INFO: %w", t.name, err)
	}
	return parseServerInfo(t.name, text)
}

// parseServerInfo picks the fields the engine needs out of INFO's
// "field:value" lines.
func parseServerInfo(name, text string) (transport.ServerInfo, error) {
	var (
		info                     transport.ServerInfo
		uptime                   = -1
		role, host, port, policy string
		maxmemory                int64
	)
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "run_id":
			info.RunID = v
		case "uptime_in_seconds":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return info, fmt.Errorf("rueidis %s: INFO: bad uptime_in_seconds %q", name, v)
			}
			uptime = n
		case "role":
			role = v
		case "master_host":
			host = v
		case "master_port":
			port = v
		case "maxmemory":
			maxmemory, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			policy = v
		case "evicted_keys":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return info, fmt.Errorf("rueidis %s: INFO: bad evicted_keys %q", name, v)
			}
			info.Evicted = n
		}
	}
	if info.RunID == "" || uptime < 0 {
		return info, fmt.Errorf("rueidis %s: INFO lacks run_id or uptime_in_seconds", name)
	}
	// Redis computes the uptime from whole wall-clock seconds, so it can
	// read 1 just after a start; the contract wants it never ahead of the
	// truth (it ends a restart quarantine), so take a second off.
	info.Uptime = time.Duration(max(uptime-1, 0)) * time.Second
	// A replica, or a master that evicts keys under a memory limit, can
	// lose a held lock's key: the engine keeps it from voting.
	if role != "" && role != "master" {
		info.ReplicaOf = net.JoinHostPort(host, port)
	}
	if maxmemory > 0 && policy != "" && policy != "noeviction" {
		info.Eviction = "maxmemory-policy " + policy
	}
	return info, nil
}

// withDeadline gives a ctx without a deadline the OpTimeout one, so that a
// master that never answers cannot hold a caller forever.
func (t *Transport) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, t.opTimeout)
}

// callErr describes an error that is not the master's reply: the
// connection's, the context's, or the client's after Close.
func (t *Transport) callErr(ctx context.Context, err error) error {
	switch {
	case t.closed.Load():
		return t.errClosed
	case ctx.Err() != nil:
		return fmt.Errorf("rueidis %s: no answer: %w", t.name, ctx.Err())
	default:
		return fmt.Errorf("%w: rueidis %s: %w", transport.ErrUnavailable, t.name, err)
	}
}

// batch is the scratch of one Do, pooled.
type batch struct {
	cmds  []rueidis.Completed
	index []int // cmds[j] answers ops[index[j]]
	retry []int // positions j that met NOSCRIPT
	ran   map[string]struct{}
}

var batchPool = sync.Pool{New: func() any { return &batch{ran: map[string]struct{}{}} }}

func (b *batch) release() {
	clear(b.cmds) // rueidis recycles the commands; do not keep them
	b.cmds, b.index, b.retry = b.cmds[:0], b.index[:0], b.retry[:0]
	if cap(b.index) <= 4096 {
		batchPool.Put(b)
	}
}
