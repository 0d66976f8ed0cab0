package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"github.com/quorumlock/redlock/transport/redis"
)

// Issue 9, finding 3: when a master's address starts reaching another
// process (a VIP or DNS flip, a promoted replica, a reused port) that has
// been up for long but never held our keys, its uptime says nothing about
// our locks. The quarantine must run from the moment the new run id is first
// seen, not from that process's start.

// flipper is one master's address: it forwards to one of several in-memory
// masters and can be switched to another, like a VIP. Every master behind it
// reports an uptime age longer than its own: processes that have been up
// for long. Switching changes the epoch, as a reconnect to the new server
// does.
type flipper struct {
	name string
	age  time.Duration
	mu   sync.Mutex
	ms   []*memory.Master
	ts   []transport.Transport
	cur  int
	gen  uint64
	// onInfo, when set, runs once at the start of the next ServerInfo:
	// the address can flip while the engine is reading it.
	onInfo func()
}

func newFlipper(name string, age time.Duration, ms ...*memory.Master) *flipper {
	f := &flipper{name: name, age: age, ms: ms}
	for _, m := range ms {
		f.ts = append(f.ts, m.Transport())
	}
	return f
}

func (f *flipper) to(i int) {
	f.mu.Lock()
	f.cur, f.gen = i, f.gen+1
	f.mu.Unlock()
}

// current is the transport behind the address, nil while it reaches
// nothing (to(-1): down).
func (f *flipper) current() transport.Transport {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur < 0 {
		return nil
	}
	return f.ts[f.cur]
}

var errDown = fmt.Errorf("%w: the address reaches nothing", transport.ErrUnavailable)

func (f *flipper) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	t := f.current()
	if t == nil {
		return transport.Fail(res, errDown)
	}
	return t.Do(ctx, ops, res)
}

func (f *flipper) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	f.mu.Lock()
	hook := f.onInfo
	f.onInfo = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	t := f.current()
	if t == nil {
		return transport.ServerInfo{}, errDown
	}
	si, err := t.(transport.ServerReporter).ServerInfo(ctx)
	si.Uptime += f.age
	return si, err
}

// Epoch changes with every switch and every restart of the master behind.
func (f *flipper) Epoch() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur < 0 {
		return f.gen << 32
	}
	return f.gen<<32 | f.ts[f.cur].(transport.ServerReporter).Epoch()
}

func (f *flipper) Name() string { return f.name }

func (f *flipper) Close() error {
	for _, t := range f.ts {
		_ = t.Close()
	}
	return nil
}

// logRecords is a slog handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// attr returns attribute key of the first record at level whose message
// contains msg.
func (h *logRecords) attr(level slog.Level, msg, key string) (slog.Value, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Level != level || !strings.Contains(r.Message, msg) {
			continue
		}
		var v slog.Value
		found := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v, found = a.Value, true
				return false
			}
			return true
		})
		return v, found
	}
	return slog.Value{}, false
}

func (h *logRecords) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

// masterErr is the error the master named name answered in err's *api.Error.
func masterErr(t *testing.T, err error, name string) error {
	t.Helper()
	_, me := masterAnswer(t, err, name)
	return me
}

// masterAnswer is the answer of the master named name in err's *api.Error.
func masterAnswer(t *testing.T, err error, name string) (api.Answer, error) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%v is not an *api.Error", err)
	}
	for _, m := range ae.Masters {
		if m.Master == name {
			return m.Answer, m.Err
		}
	}
	t.Fatalf("no answer from %s in %v", name, err)
	return 0, nil
}

// checkVotesAgainIn checks the restart warning: it must say when the
// flipped master votes again, which is a full period from now, not at once.
func checkVotesAgainIn(t *testing.T, logs *logRecords, period time.Duration) {
	t.Helper()
	v, ok := logs.attr(slog.LevelWarn, "quarantine", "votes_again_in")
	if !ok {
		t.Fatal("no quarantine warning with votes_again_in was logged")
	}
	if d := v.Duration(); d <= 0 || d > period {
		t.Fatalf("warning says the master votes again in %v; want within (0, %v]", d, period)
	}
}

// warmEngine starts an engine over ts with quarantine period ttl and a one
// second master timeout, and takes and releases a lock once, so that every
// master that votes has been read. It fails t with what if that lock fails.
func warmEngine(t *testing.T, ts []transport.Transport, ttl time.Duration, logs *logRecords, what string) *engine.Engine {
	t.Helper()
	e, err := engine.NewWithTransports(ts, api.WithTTL(ttl), api.WithRestartQuarantine(ttl),
		api.WithMasterTimeout(time.Second), api.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	l, err := e.TryLock(context.Background(), "warm")
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = l.Unlock(context.Background())
	return e
}

// heard makes sure that e's restart quarantine has read who is behind its
// master x. warmEngine does not wait for that read: the warm lock can be
// granted by the other two masters while it is still to come (the run id
// the constructor reads, to find one server listed twice, is not the
// quarantine's). An address that flips before the read is, for e, the
// server it first saw, trusted by its uptime as by any fresh engine; e has
// counted no vote from the server before. A lock that refuse (the third
// master) refuses is granted only with x's vote, and x votes only once its
// read is in.
func heard(t *testing.T, e *engine.Engine, ttl time.Duration, refuse *memory.Master) {
	t.Helper()
	hold(t, "heard", ttl, refuse)
	l, err := e.TryLock(context.Background(), "heard")
	if err != nil {
		t.Fatalf("x and y did not grant a lock only z refuses: %v", err)
	}
	_ = l.Unlock(context.Background())
}

// flippedKeptOut checks that TryLock(key), which only x's vote can win, is
// refused with x in quarantine; why says why x must not vote.
func flippedKeptOut(t *testing.T, e *engine.Engine, key, why string) {
	t.Helper()
	held, err := e.TryLock(context.Background(), key)
	if err == nil {
		_ = held.Unlock(context.Background())
		t.Fatal("the flipped master voted at once: " + why)
	}
	if me := masterErr(t, err, "x"); !errors.Is(me, api.ErrQuarantined) {
		t.Fatalf("the flipped master answered %v; want ErrQuarantined (%v)", me, err)
	}
}

// hold sets key on each master for someone else.
func hold(t *testing.T, key string, ttl time.Duration, ms ...*memory.Master) {
	t.Helper()
	res := make([]transport.Result, 1)
	for _, m := range ms {
		_ = m.Transport().Do(context.Background(), []transport.Op{{Kind: transport.Acquire, Key: key, Value: "someone-else", TTL: ttl}}, res)
		if !res[0].OK {
			t.Fatalf("setting up %s: %+v", key, res[0])
		}
	}
}

// Memory masters: x's address flips from a to other, a process up for an
// hour. Before the fix it voted at once (its start was put an hour back).
func TestAddressFlipQuarantinedFromFirstSight(t *testing.T) {
	const ttl = 10 * time.Second
	a, other, b, c := memory.New(), memory.New(), memory.New(), memory.New()
	x := newFlipper("x", time.Hour, a, other)
	ts := []transport.Transport{x, newFlipper("y", time.Hour, b), newFlipper("z", time.Hour, c)}
	logs := &logRecords{}
	// Every master has been up for an hour: all vote from the start.
	e := warmEngine(t, ts, ttl, logs, "TryLock on masters up for an hour")
	heard(t, e, ttl, c)

	x.to(1)
	// y holds k for someone else, so only x and z can make a majority:
	// the lock is granted only if the flipped master votes.
	hold(t, "k", ttl, b)
	flippedKeptOut(t, e, "k", "its process is an hour old, but new behind this address and never held our keys")
	checkVotesAgainIn(t, logs, ttl)
}

// The address flips after the constructor has read who is behind x (to
// find one server listed twice) and before the restart quarantine's first
// read: the engine has seen a, so the server it then finds is another one,
// new behind the address whatever its uptime. Before the fix the quarantine
// started from nothing, took the new server for its first sight and let it
// vote at once, as a fresh engine would.
func TestAddressFlipBetweenConstructorAndFirstRead(t *testing.T) {
	const ttl = 10 * time.Second
	a, other, b, c := memory.New(), memory.New(), memory.New(), memory.New()
	x := newFlipper("x", time.Hour, a, other)
	// The first ServerInfo is the constructor's; the second, the
	// quarantine's first read, finds the address flipped.
	x.onInfo = func() {
		x.mu.Lock()
		x.onInfo = func() { x.to(1) }
		x.mu.Unlock()
	}
	logs := &logRecords{}
	e, err := engine.NewWithTransports([]transport.Transport{x, newFlipper("y", time.Hour, b), newFlipper("z", time.Hour, c)},
		api.WithTTL(ttl), api.WithRestartQuarantine(ttl), api.WithMasterTimeout(time.Second), api.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	// z holds k for someone else, so only x and y can make a majority.
	hold(t, "k", ttl, c)
	flippedKeptOut(t, e, "k", "the constructor saw another server behind its address")
	// The quarantine names the server it knew: a, read by the constructor
	// alone.
	ai, _ := a.Transport().(transport.ServerReporter).ServerInfo(ctx)
	if v, ok := logs.attr(slog.LevelWarn, "another master process", "old_run_id"); !ok || v.String() != ai.RunID {
		t.Fatalf("the quarantine's warning names old_run_id %v (logged: %v); want a's run id %s", v, ok, ai.RunID)
	}
	checkVotesAgainIn(t, logs, ttl)
}

// watched is a Redis transport that signals when ServerInfo first returns a
// run id, and when it first returns one other than that: the engine has
// read the process now behind the address.
type watched struct {
	*redis.Transport
	mu      sync.Mutex
	first   string
	up      chan struct{} // closed at the first run id
	flipped chan struct{} // closed at the first run id other than that
}

func (w *watched) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	si, err := w.Transport.ServerInfo(ctx)
	if err == nil {
		w.mu.Lock()
		switch {
		case w.first == "":
			w.first = si.RunID
			if w.up != nil {
				close(w.up)
			}
		case si.RunID != w.first && w.flipped != nil:
			close(w.flipped)
			w.flipped = nil
		}
		w.mu.Unlock()
	}
	return si, err
}

// Real servers: the master's address is a proxy that flips from its server
// to other, which was started first and has been up longer. Before the fix
// the flipped master voted at once.
func TestRedisAddressFlipQuarantinedFromFirstSight(t *testing.T) {
	const period = 2 * time.Second
	other := redistest.Start(t, 1)[0] // older than the master: it would pass any uptime check the master passes
	srv := redistest.Start(t, 1)[0]
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rt, err := redis.New(redis.Config{Addr: p.Addr(), ReconnectInitial: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	flipped := make(chan struct{})
	w := &watched{Transport: rt, flipped: flipped}
	logs := &logRecords{}
	// One master, so that its vote alone decides.
	e, err := engine.NewWithTransports([]transport.Transport{w}, api.WithTTL(period), api.WithRestartQuarantine(period), api.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// The fresh master sits out its period; Lock retries until it votes.
	wctx, cancel := context.WithTimeout(context.Background(), 10*period)
	defer cancel()
	l, err := e.Lock(wctx, "warm", api.WithMaxAttempts(0))
	if err != nil {
		t.Fatalf("the master never voted: %v", err)
	}
	_ = l.Unlock(context.Background())

	p.SetTarget(other.Addr)
	p.Reset()
	select {
	case <-flipped:
	case <-wctx.Done():
		t.Fatal("the engine never read the server now behind the address")
	}
	seen := time.Now() // no earlier than the engine's first sight of it
	held, err := e.TryLock(context.Background(), "k")
	if err == nil {
		_ = held.Unlock(context.Background())
		if time.Since(seen) >= period {
			t.Skipf("the machine took %v to send one TryLock: longer than the %v period, so the test cannot tell", time.Since(seen), period)
		}
		t.Fatal("the flipped master voted at once: other has been up longer than the period, but is new behind this address and never held our keys")
	}
	if me := masterErr(t, err, p.Addr()); !errors.Is(me, api.ErrQuarantined) {
		t.Fatalf("the flipped master answered %v; want ErrQuarantined (%v)", me, err)
	}
	checkVotesAgainIn(t, logs, period)
}

// The address flips to another server and back while the engine reads the
// run id that should have told it about the flip: the read describes the
// server behind the later connection (the one the engine knew all along),
// not the one that answered the batches in between. Those answers must not
// be vouched for by it. Before the fix the node filed the read under the
// epoch it started in, and the other server's grant counted.
func TestAddressFlipBackDuringInfoRead(t *testing.T) {
	const ttl = 10 * time.Second
	a, other, b, c := memory.New(), memory.New(), memory.New(), memory.New()
	x := newFlipper("x", time.Hour, a, other)
	ts := []transport.Transport{x, newFlipper("y", time.Hour, b), newFlipper("z", time.Hour, c)}
	e := warmEngine(t, ts, ttl, &logRecords{}, "TryLock on masters up for an hour")
	ctx := context.Background()
	heard(t, e, ttl, c)
	// Someone else holds k on a (behind x) and on y: a majority. Only a
	// grant from the other server behind x could give us k.
	hold(t, "k", ttl, a, b)
	x.mu.Lock()
	x.onInfo = func() { x.to(0) } // flips back as the engine asks who is there
	x.mu.Unlock()
	x.to(1)
	held, err := e.TryLock(ctx, "k")
	if err == nil {
		_ = held.Unlock(ctx)
		t.Fatal("granted k while someone else holds it on a majority: the other server's grant was vouched for by a read of the server behind the next connection")
	}
	if v, _ := other.Get("k"); v == "" {
		t.Fatal("the other server never saw the SET: the test did not make the batch it means to")
	}
}
