package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

func memMasters(t *testing.T, n int, opts ...api.Option) ([]*memory.Master, *engine.Engine) {
	t.Helper()
	masters := make([]*memory.Master, n)
	ts := make([]transport.Transport, n)
	for i := range masters {
		masters[i] = memory.New()
		ts[i] = masters[i].Transport()
	}
	e, err := engine.NewWithTransports(ts, append([]api.Option{api.WithoutRestartQuarantine()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return masters, e
}

func TestSemaphoreBadInput(t *testing.T) {
	e := newMemory(t, 3)
	long := strings.Repeat("n", 1010) // its slot keys pass 1024 bytes
	for _, c := range []struct {
		name    string
		sem     string
		permits int
		opts    []api.LockOption
		want    string
	}{
		{"zero permits", "s", 0, nil, "0 permits"},
		{"negative permits", "s", -3, nil, "-3 permits"},
		{"too many permits", "s", api.MaxPermits + 1, nil, "permits: a semaphore has 1 to"},
		{"empty name", "", 2, nil, "empty semaphore name"},
		{"fence prefix", transport.FencePrefix + "x", 2, nil, "fencing counters"},
		{"name too long", long, 2, nil, "use a name at most 1008 bytes long"},
		{"bad option", "s", 2, []api.LockOption{api.WithTTL(-time.Second)}, "ttl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, try := range []func(context.Context, string, int, ...api.LockOption) (api.Lock, error){e.Semaphore, e.TrySemaphore} {
				l, err := try(context.Background(), c.sem, c.permits, c.opts...)
				if l != nil || !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, %v; want ErrInvalidArgument saying %q", l, err, c.want)
				}
			}
		})
	}
	// The longest name that fits any number of permits is taken.
	l, err := e.TrySemaphore(context.Background(), long[:1006], api.MaxPermits)
	if err != nil {
		t.Fatalf("a 1006-byte name: %v", err)
	}
	_ = l.Unlock(context.Background())
}

// TestSemaphoreTakenAndFreed: P TrySemaphores hold distinct slots, the next
// is refused as taken, and nothing is left on any master once every holder
// unlocked, extra grants included.
func TestSemaphoreTakenAndFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		masters, e := memMasters(t, 3)
		defer e.Close()
		ctx := context.Background()
		const p = 5
		var held []api.Lock
		slots := map[string]bool{}
		for range p {
			l, err := e.TrySemaphore(ctx, "pool", p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(l.Key(), "redlock-sem:{pool}:") || slots[l.Key()] {
				t.Fatalf("permit on %q; held %v", l.Key(), slots)
			}
			slots[l.Key()] = true
			held = append(held, l)
		}
		_, err := e.TrySemaphore(ctx, "pool", p)
		if !errors.Is(err, api.ErrNotAcquired) || errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("TrySemaphore on a full semaphore: %v, want ErrNotAcquired", err)
		}
		synctest.Wait() // every release and discard has been answered
		for i, m := range masters {
			if n := m.Len(); n != p {
				t.Fatalf("master %d holds %d keys with %d permits held; want %d", i, n, p, p)
			}
		}
		for _, l := range held {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		for i, m := range masters {
			if n := m.Len(); n != 0 {
				t.Fatalf("master %d holds %d keys after every Unlock", i, n)
			}
		}
	})
}

// TestSemaphoreExtraGrantsReleased: with one slot of three held, an
// attempt that starts on the held slot tries the other two at once, is
// granted both, and releases the one it does not keep. Fencing counts the
// grants: every slot's counter moves once per grant of it.
func TestSemaphoreExtraGrantsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		masters, e := memMasters(t, 3)
		defer e.Close()
		ctx := context.Background()
		held, err := e.TrySemaphore(ctx, "wide", 3, api.WithFencing(true))
		if err != nil {
			t.Fatal(err)
		}
		const rounds = 40 // an attempt starts on the held slot with probability 1/3
		for range rounds {
			l, err := e.TrySemaphore(ctx, "wide", 3, api.WithFencing(true))
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the extra grant's release has been answered
			for i, m := range masters {
				if n := m.Len(); n != 2 {
					t.Fatalf("master %d holds %d keys; want only the two permits'", i, n)
				}
				if v, ok := m.Get(l.Key()); !ok || v != l.Value() {
					t.Fatalf("master %d: permit key %q = %q, %v; want %q", i, l.Key(), v, ok, l.Value())
				}
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var grants int64
		for i := range 3 {
			if k := api.SemaphoreSlot("wide", i); k != held.Key() {
				grants += masters[0].Fence(k)
			}
		}
		if grants <= rounds {
			t.Fatalf("%d grants of the free slots in %d rounds: no attempt was granted an extra slot, so none was released", grants, rounds)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i, m := range masters {
			if n := m.Len(); n != 0 {
				t.Fatalf("master %d holds %d keys after every Unlock", i, n)
			}
		}
	})
}

// atMostP runs goroutines that take permits of one semaphore and records
// how many hold one at once.
func atMostP(t *testing.T, l api.Locker, p, goroutines, rounds int, opts ...api.LockOption) (peak int32) {
	t.Helper()
	var inside, maxIn atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				lk, err := l.Semaphore(context.Background(), "sem", p, opts...)
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for {
					m := maxIn.Load()
					if n <= m || maxIn.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(time.Millisecond) // hold it a while, so holders meet
				inside.Add(-1)
				if err := lk.Unlock(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("semaphore: %v", err)
	}
	if m := maxIn.Load(); m > int32(p) {
		t.Fatalf("%d holders at once with %d permits", m, p)
	}
	return maxIn.Load()
}

func TestSemaphoreAtMostPMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, e := memMasters(t, 5)
		defer e.Close()
		if peak := atMostP(t, e, 3, 20, 10); peak != 3 {
			// 20 goroutines want a permit all the time: in fake time the
			// first three hold theirs together.
			t.Fatalf("peak %d holders, want all 3 permits used", peak)
		}
	})
}

// TestSemaphoreAtMostPTwoEngines: two engines (two local lines) contend.
func TestSemaphoreAtMostPTwoEngines(t *testing.T) {
	masters := []*memory.Master{memory.New(), memory.New(), memory.New()}
	var engines []api.Locker
	for range 2 {
		ts := make([]transport.Transport, len(masters))
		for i, m := range masters {
			ts[i] = m.Transport()
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		engines = append(engines, e)
	}
	var both both
	both.ls = engines
	atMostP(t, &both, 2, 12, 10)
}

// both hands out the semaphores of its engines in turn.
type both struct {
	api.Locker
	ls []api.Locker
	n  atomic.Int32
}

func (b *both) Semaphore(ctx context.Context, name string, p int, opts ...api.LockOption) (api.Lock, error) {
	return b.ls[int(b.n.Add(1))%len(b.ls)].Semaphore(ctx, name, p, opts...)
}

// TestSemaphoreLocalWake: a waiter is woken by a local Unlock, not by its
// backoff, which here is far longer than the test may take.
func TestSemaphoreLocalWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, e := memMasters(t, 3)
		defer e.Close()
		ctx := context.Background()
		slow := api.WithRetry(api.Retry{InitialInterval: time.Hour, RandomizationFactor: 0.1, Multiplier: 2, MaxInterval: time.Hour})
		a, err := e.Semaphore(ctx, "one", 1, api.WithTTL(10*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := e.Semaphore(ctx, "one", 1, slow, api.WithTTL(10*time.Hour))
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		synctest.Wait() // the waiter sleeps in its hour-long backoff
		start := time.Now()
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Minute {
			t.Fatalf("the waiter took %v after the Unlock: it waited out its backoff", d)
		}
	})
}

func TestSemaphoreFencingPerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		masters, e := memMasters(t, 3)
		defer e.Close()
		ctx := context.Background()
		last := map[string]int64{}
		// Both permits at once each round, so both slots are used every
		// round: one permit at a time starts at a random slot, and 12 of
		// them all found the same one once in about 2,000 runs.
		for range 6 {
			var held []api.Lock
			for range 2 {
				l, err := e.TrySemaphore(ctx, "fenced", 2, api.WithFencing(true))
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
				if l.Token() <= last[l.Key()] {
					t.Fatalf("slot %s: token %d after %d", l.Key(), l.Token(), last[l.Key()])
				}
				last[l.Key()] = l.Token()
				synctest.Wait()
				confirmed := 0
				for _, m := range masters {
					if m.Fence(l.Key()) >= l.Token() {
						confirmed++
					}
				}
				if confirmed < 2 {
					t.Fatalf("%d masters have the fence of %s at token %d or above; want a majority", confirmed, l.Key(), l.Token())
				}
			}
			if held[0].Key() == held[1].Key() {
				t.Fatalf("two permits held at once on one slot, %s", held[0].Key())
			}
			for _, l := range held {
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(last) != 2 {
			t.Fatalf("permits of 2 slots used slots %v", last)
		}
	})
}

func TestRedisSemaphore(t *testing.T) {
	servers, e := fiveMasters(t)
	ctx := context.Background()
	atMostP(t, e, 3, 30, 5)
	// A minority down: permits are still granted and refused correctly.
	servers[0].Kill()
	servers[4].Kill()
	up := servers[1:4]
	var held []api.Lock
	for range 2 {
		l, err := e.TrySemaphore(ctx, "minority", 2)
		if err != nil {
			t.Fatalf("TrySemaphore with 3 of 5 up: %v", err)
		}
		held = append(held, l)
	}
	if _, err := e.TrySemaphore(ctx, "minority", 2); !errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("third TrySemaphore of 2 permits: %v, want ErrNotAcquired", err)
	}
	// The refused attempt left nothing: each live master holds exactly the
	// two permits.
	for _, s := range up {
		if ks := s.Keys(t, "redlock-sem:*"); len(ks) != 2 {
			t.Fatalf("%s holds %v with two permits held", s.Addr, ks)
		}
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Discarded extra grants are released in the background: poll (a key
	// deleted on a real Redis is no event this test can wait on).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		for _, s := range up {
			n += len(s.Keys(t, "redlock-sem:*"))
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slot keys left on the live masters after every Unlock", n)
		}
	}
	// A majority down: unreachable, not taken.
	servers[1].Kill()
	_, err := e.TrySemaphore(ctx, "minority", 2)
	if !errors.Is(err, api.ErrQuorumUnreachable) || errors.Is(err, api.ErrNotAcquired) {
		t.Fatalf("TrySemaphore with 2 of 5 up: %v, want ErrQuorumUnreachable", err)
	}
}

// undecidedWindow sets up an attempt whose window holds a child that won
// and a child still deciding (its master held at a gate), and calls hit
// with the attempt's cancel and result channel, the masters and the
// winning slot; the TrySemaphore runs with opts. Semaphore "c" has three
// slots: one held, b refused by master 0 (a stranger's key there) and
// undecided while master 2 is held, and c free on the fast masters, so
// its child wins at once. The attempt must start on the held slot, so that
// b and c are its second window; the start is random, so it tries until
// one does.
func undecidedWindow(t *testing.T, opts []api.LockOption, hit func(cancel func(), got <-chan semResult, g *gate, masters []*memory.Master, c string)) {
	masters := []*memory.Master{memory.New(), memory.New(), memory.New()}
	g := &gate{Transport: masters[2].Transport()}
	e, err := engine.NewWithTransports([]transport.Transport{masters[0].Transport(), masters[1].Transport(), g}, api.WithoutRestartQuarantine())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	defer g.release() // before Close, which waits for batches in flight
	ctx := context.Background()
	held, err := e.TrySemaphore(ctx, "c", 3)
	if err != nil {
		t.Fatal(err)
	}
	var free []string
	for i := range 3 {
		if k := api.SemaphoreSlot("c", i); k != held.Key() {
			free = append(free, k)
		}
	}
	b, c := free[0], free[1]
	res := make([]transport.Result, 1)
	if err := masters[0].Transport().Do(ctx, []transport.Op{{Kind: transport.Acquire, Key: b, Value: "stranger", TTL: time.Hour}}, res); err != nil || !res[0].OK {
		t.Fatalf("setting the stranger's key: %v %+v", err, res[0])
	}
	g.key = b
	for range 100 {
		g.arm()
		cctx, cancel := context.WithCancel(ctx)
		got := make(chan semResult, 1)
		go func() {
			l, err := e.TrySemaphore(cctx, "c", 3, opts...)
			got <- semResult{l, err}
		}()
		synctest.Wait()
		if _, won := masters[0].Get(c); won && len(got) == 0 {
			hit(cancel, got, g, masters, c)
			cancel()
			return
		}
		// Started on c (won alone) or on b (c never tried).
		cancel()
		g.release()
		if r := <-got; r.err == nil {
			_ = r.l.Unlock(ctx)
		}
		synctest.Wait()
	}
	t.Fatal("no attempt in 100 started on the held slot")
}

type semResult struct {
	l   api.Lock
	err error
}

// TestSemaphoreCancelledWinnerReleased: an attempt whose window has a
// winner and a child still deciding is cancelled: the winner, never handed
// to the caller, must be released.
func TestSemaphoreCancelledWinnerReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		undecidedWindow(t, nil, func(cancel func(), got <-chan semResult, g *gate, masters []*memory.Master, c string) {
			cancel()
			if r := <-got; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("cancelled TrySemaphore: %v", r.err)
			}
			synctest.Wait()
			for i, m := range masters[:2] {
				if v, ok := m.Get(c); ok {
					t.Fatalf("master %d still holds the cancelled attempt's winning slot %s = %q", i, c, v)
				}
			}
		})
	})
}

// TestSemaphoreLateWinnerRefused: the winner's validity runs out while
// another child of its window is still deciding: the attempt must not hand
// out a permit that is already over (as a lock granted too late is
// refused), and must release it.
func TestSemaphoreLateWinnerRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ttl := 100 * time.Millisecond
		undecidedWindow(t, []api.LockOption{api.WithTTL(ttl)}, func(cancel func(), got <-chan semResult, g *gate, masters []*memory.Master, c string) {
			time.Sleep(ttl) // fake time: the winner's validity runs out
			g.release()
			r := <-got
			if r.err == nil {
				t.Fatalf("TrySemaphore returned a permit on %s whose validity ended %v ago", r.l.Key(), time.Since(r.l.Until()))
			}
			if !errors.Is(r.err, api.ErrQuorumUnreachable) || !strings.Contains(r.err.Error(), "too late") {
				t.Fatalf("TrySemaphore: %v; want ErrQuorumUnreachable, granted too late", r.err)
			}
			// The winner's masters granted: its answers are the ones
			// that tell, not "too few masters answered in time".
			if msg := r.err.Error(); strings.Contains(msg, "too few masters answered") || !strings.Contains(msg, "masters granted, but too late") {
				t.Errorf("TrySemaphore: %s\nwant the headline to say a majority granted too late", msg)
			}
			synctest.Wait()
			for i, m := range masters {
				if v, ok := m.Get(c); ok {
					t.Fatalf("master %d still holds the late winner's slot %s = %q", i, c, v)
				}
			}
		})
	})
}

// gate holds every batch that acquires key until release, whatever the
// batch's context says: a master that has not answered yet, with no timer
// involved (synctest.Wait would let a timeout pass).
type gate struct {
	transport.Transport
	key  string
	mu   sync.Mutex
	open chan struct{} // nil: batches pass
}

func (g *gate) arm() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
	g.mu.Unlock()
}

func (g *gate) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	for _, op := range ops {
		if ch != nil && op.Kind == transport.Acquire && op.Key == g.key {
			<-ch
			break
		}
	}
	return g.Transport.Do(ctx, ops, res)
}
