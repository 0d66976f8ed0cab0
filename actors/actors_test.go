package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gated wraps a real in-memory master; while closed, every Do waits for the
// gate (or its ctx) before touching the master, like a slow master. It
// records the order in which ops reach the master.
type gated struct {
	transport.Transport
	gate chan struct{}
	// late, when set, holds a timed-out batch until it is closed, like a
	// transport whose I/O returns well after the deadline.
	late chan struct{}
	mu   sync.Mutex
	seen []transport.Op
	// arrived, when t0 is set, is when each batch with an acquire (of
	// kind acq, Acquire when unset) reached Do, since t0.
	t0      time.Time
	acq     transport.OpKind
	arrived []time.Duration
}

// acquire is the acquire kind g watches for.
func (g *gated) acquire() transport.OpKind {
	if g.acq == 0 {
		return transport.Acquire
	}
	return g.acq
}

func (g *gated) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if !g.t0.IsZero() && slices.ContainsFunc(ops, func(op transport.Op) bool { return op.Kind == g.acquire() }) {
		g.mu.Lock()
		g.arrived = append(g.arrived, time.Since(g.t0))
		g.mu.Unlock()
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		if g.late != nil {
			<-g.late
		}
		return transport.Fail(res, ctx.Err())
	}
	g.mu.Lock()
	g.seen = append(g.seen, ops...)
	g.mu.Unlock()
	return g.Transport.Do(ctx, ops, res)
}

func start(t *testing.T, ts []transport.Transport, timeout time.Duration, inFlight int) *Cluster {
	t.Helper()
	names := make([]string, len(ts))
	for i := range names {
		names[i] = "m" + string(rune('0'+i))
	}
	c, err := Start(Config{Transports: ts, Names: names, MasterTimeout: timeout, MaxBatch: 64, MaxInFlight: inFlight, Coordinators: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func run(t *testing.T, c *Cluster, call *Call) error {
	t.Helper()
	call.Retry = api.DefaultOptions().Retry
	call.Retry.MaxAttempts = 1
	if err := c.Submit(call); err != nil {
		t.Fatal(err)
	}
	select {
	case <-call.Done():
		return call.Err
	case <-time.After(10 * time.Second):
		t.Fatal("call never finished")
		return nil
	}
}

// With two batches allowed in flight, a release must still wait for the
// acquire of the same key that is stuck in the first batch; otherwise it
// would reach the slow master first, find nothing, and the late SET would
// leave a key behind after Unlock.
func TestReleaseNeverOvertakesAcquire(t *testing.T) {
	synctest.Test(t, testReleaseNeverOvertakesAcquire)
}

func testReleaseNeverOvertakesAcquire(t *testing.T) {
	slowMaster := memory.New()
	slow := &gated{Transport: slowMaster.Transport(), gate: make(chan struct{})}
	fast1, fast2 := memory.New(), memory.New()
	c := start(t, []transport.Transport{fast1.Transport(), fast2.Transport(), slow}, 5*time.Second, 2)

	acq := NewCall(Acquire, "trylock", "k", "v1", time.Minute, time.Millisecond)
	if err := run(t, c, acq); err != nil {
		t.Fatalf("acquire with 2 of 3 fast masters: %v", err)
	}
	rel := NewCall(Release, "unlock", "k", "v1", time.Minute, time.Millisecond)
	if err := c.Submit(rel); err != nil {
		t.Fatal(err)
	}
	// An unrelated key may go ahead in a second batch; it must not be held
	// up, and it shows the second slot is really in use.
	other := NewCall(Acquire, "trylock", "other", "v2", time.Minute, time.Millisecond)
	other.Retry = api.DefaultOptions().Retry
	other.Retry.MaxAttempts = 1
	if err := c.Submit(other); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // both are queued or sent, and wait on the slow master
	close(slow.gate)
	<-rel.Done()
	<-other.Done()
	if rel.Err != nil {
		t.Fatalf("release: %v", rel.Err)
	}
	for i, m := range []*memory.Master{fast1, fast2, slowMaster} {
		if v, ok := m.Get("k"); ok {
			t.Fatalf("master %d still holds k=%q after release", i, v)
		}
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	var order []transport.OpKind
	for _, op := range slow.seen {
		if op.Key == "k" {
			order = append(order, op.Kind)
		}
	}
	if len(order) != 2 || order[0] != transport.Acquire || order[1] != transport.Release {
		t.Fatalf("ops on k reached the slow master as %v; want [acquire release]", order)
	}
}

type panicky struct{ transport.Transport }

func (panicky) Do(context.Context, []transport.Op, []transport.Result) error { panic("boom") }

func TestPanickingTransportIsAFailedMaster(t *testing.T) {
	c := start(t, []transport.Transport{panicky{memory.New().Transport()}, panicky{memory.New().Transport()}, memory.New().Transport()}, time.Second, 1)
	err := run(t, c, NewCall(Acquire, "trylock", "k", "v", time.Minute, time.Millisecond))
	var ae *api.Error
	if !errors.Is(err, api.ErrQuorumUnreachable) || !errors.As(err, &ae) || ae.Masters[0].Answer != api.Failed {
		t.Fatalf("got %v; want ErrQuorumUnreachable with master 0 failed", err)
	}
}

// An acquire that waited in a node's queue past its attempt's deadline
// (queueLimit: the TTL here) is dropped without being sent, since it could
// only take a key that must then be released again; and the drop is
// overload, not a master's failure: the attempt is retried, not reported.
// The same for every kind of lock: a read-write lock's acquires (shared
// and exclusive) are SETs too.
func TestStaleAcquireIsNotSent(t *testing.T) {
	for _, m := range []struct {
		name string
		mode Mode
	}{{"mutex", Mutex}, {"reader", Reader}, {"writer", Writer}} {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testStaleAcquireIsNotSent(t, m.mode) })
		})
	}
}

func testStaleAcquireIsNotSent(t *testing.T, mode Mode) {
	g := &gated{Transport: memory.New().Transport(), gate: make(chan struct{}), late: make(chan struct{}), t0: time.Now(), acq: mode.acquire()}
	c := start(t, []transport.Transport{g}, 30*time.Millisecond, 1)
	const ttl = 100 * time.Millisecond // the queue limit: longer than the 30ms timeout
	first := NewCall(Acquire, "trylock", "a", "v1", ttl, time.Millisecond)
	second := NewCall(Acquire, "trylock", "b", "v2", ttl, time.Millisecond)
	for i, call := range []*Call{first, second} {
		call.Mode = mode
		call.Retry = api.DefaultOptions().Retry
		call.Retry.MaxAttempts = 1
		if err := c.Submit(call); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The second acquire must find the first's batch out, so that
			// it waits in the queue: submitted together, both can reach
			// the node before it flushes and go in one batch, and there
			// is nothing stale to drop (a busy machine did that). Waiting
			// for the bubble to idle takes no fake time: both attempts
			// still begin at the same instant.
			synctest.Wait()
			g.mu.Lock()
			out := slices.Clone(g.arrived)
			g.mu.Unlock()
			if len(out) != 1 || out[0] != 0 {
				t.Fatalf("the first acquire's batch reached the master at %v; want once, at once", out)
			}
		}
	}
	// The first batch is held past its timeout until both attempts'
	// queue limits have passed (fake time: both attempts began at the same
	// instant); otherwise the second attempt could still be fresh when the
	// first batch returns, and be rightly sent.
	time.Sleep(150 * time.Millisecond)
	close(g.late)
	<-first.Done()
	<-second.Done()
	// Neither reports the drop: the stale attempt was retried (its retry
	// then timed out at the closed gate like the first), and a retried
	// drop does not count against MaxAttempts.
	for _, call := range []*Call{first, second} {
		if errors.Is(call.Err, errStale) || errors.Is(call.Err, errOverloaded) {
			t.Fatalf("%s: %v; want the stale attempt retried, not reported", call.Key, call.Err)
		}
	}
	masterErr := func(err error) error {
		var ae *api.Error
		if !errors.As(err, &ae) || !errors.Is(err, api.ErrQuorumUnreachable) || len(ae.Masters) != 1 {
			t.Fatalf("got %v; want ErrQuorumUnreachable with one master's answer", err)
		}
		return ae.Masters[0].Err
	}
	// Both end timed out at the closed gate: the master is stuck, and that
	// is what unreachable means. A master's timeout is detail, not the
	// caller's own context deadline.
	for _, call := range []*Call{first, second} {
		if errors.Is(call.Err, context.DeadlineExceeded) {
			t.Fatalf("%v unwraps to context.DeadlineExceeded", call.Err)
		}
		if err := masterErr(call.Err); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v; want its batch timed out", call.Key, err)
		}
	}
	// The first was sent at once; the other waited
	// behind it until 150ms, past its 100ms queue limit, was dropped then,
	// and its retry came after a backoff at least as long as the dropped
	// attempt took (150ms). Sent at 150ms instead, it would have arrived
	// then.
	g.mu.Lock()
	arrived := slices.Clone(g.arrived)
	g.mu.Unlock()
	if len(arrived) != 2 || arrived[0] != 0 || arrived[1] < 300*time.Millisecond {
		t.Fatalf("acquires reached the master at %v after they began; want one at once and the stale one's retry after 300ms or later", arrived)
	}
	close(g.gate)
	// Only cleanup may reach the master from here on; never a SET (the
	// stale one above all). Once the bubble is idle, whatever was going to
	// be sent has been.
	synctest.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, op := range g.seen {
		if op.Kind == g.acquire() {
			t.Fatalf("the %s of %s was sent after its call ended", op.Kind, op.Key)
		}
	}
}

func TestCloseFinishesCallsInProgress(t *testing.T) {
	synctest.Test(t, testCloseFinishesCallsInProgress)
}

func testCloseFinishesCallsInProgress(t *testing.T) {
	g := &gated{Transport: memory.New().Transport(), gate: make(chan struct{})}
	c, err := Start(Config{Transports: []transport.Transport{g}, Names: []string{"m"}, MasterTimeout: 200 * time.Millisecond, MaxBatch: 8, MaxInFlight: 1, Coordinators: 1})
	if err != nil {
		t.Fatal(err)
	}
	call := NewCall(Acquire, "lock", "k", "v", time.Minute, time.Millisecond)
	call.Retry = api.DefaultOptions().Retry
	if err := c.Submit(call); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // the call's batch waits at the gate
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-call.Done()
	if !errors.Is(call.Err, api.ErrClosed) {
		t.Fatalf("call in progress at Close: %v", call.Err)
	}
	if err := c.Submit(NewCall(Acquire, "lock", "k", "v", time.Minute, time.Millisecond)); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
}
