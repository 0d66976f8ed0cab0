package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// extendGate holds, while gate is set and until open is closed, every batch
// with an extension in it on the masters that share it.
type extendGate struct {
	mu   sync.Mutex
	gate bool
	open chan struct{}
}

func (g *extendGate) set(on bool) {
	g.mu.Lock()
	g.gate = on
	g.mu.Unlock()
}

// heldExtends is a master held by a shared extendGate, which records the
// keys of the extensions it gets, in order.
type heldExtends struct {
	transport.Transport
	*extendGate
	kmu  sync.Mutex
	keys []string
}

func (s *heldExtends) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	ext := false
	s.kmu.Lock()
	for _, op := range ops {
		if op.Kind == transport.Extend {
			s.keys = append(s.keys, op.Key)
			ext = true
		}
	}
	s.kmu.Unlock()
	s.mu.Lock()
	gate := s.gate && ext
	s.mu.Unlock()
	if gate {
		select {
		case <-s.open:
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
	}
	return s.Transport.Do(ctx, ops, res)
}

func (s *heldExtends) extended() []string {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	return slices.Clone(s.keys)
}

// schedEngine is an engine over five memory masters, held by one
// extendGate, the first of which records the extensions it gets; a
// minute's master timeout, so that held extensions do not fail. Closed at
// the test's end.
func schedEngine(t *testing.T, opts ...api.Option) (*Engine, *heldExtends) {
	t.Helper()
	ts := make([]transport.Transport, 5)
	for i := range ts {
		ts[i] = memory.New().Transport()
	}
	g := &extendGate{open: make(chan struct{})}
	for i := range ts {
		ts[i] = &heldExtends{Transport: ts[i], extendGate: g}
	}
	first := ts[0].(*heldExtends)
	opts = append([]api.Option{api.WithoutRestartQuarantine(), api.WithMasterTimeout(time.Minute)}, opts...)
	e, err := NewWithTransports(ts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, first
}

func heapLen(e *Engine) int {
	e.sched.mu.Lock()
	defer e.sched.mu.Unlock()
	return len(e.sched.heap)
}

// The heap gives back what is put in it earliest first, through moves and
// removals: the order every later test relies on.
func TestSchedHeapOrder(t *testing.T) {
	s := &sched{}
	r := rand.New(rand.NewPCG(1, 2))
	ls := make([]*lock, 500)
	at := map[*lock]time.Duration{}
	for i := range ls {
		ls[i] = &lock{}
		at[ls[i]] = time.Duration(r.IntN(1000))
		s.mu.Lock()
		s.firing = true // no timer: only the order is tested here
		s.set(ls[i], at[ls[i]])
		s.mu.Unlock()
	}
	for _, l := range ls[:200] { // moves, earlier and later
		at[l] = time.Duration(r.IntN(1000))
		s.mu.Lock()
		s.set(l, at[l])
		s.mu.Unlock()
	}
	for _, l := range ls[100:300] {
		s.remove(l)
		if l.hidx != 0 {
			t.Fatalf("a removed lock still has heap index %d", l.hidx)
		}
		delete(at, l)
	}
	var got []time.Duration
	for len(s.heap) > 0 {
		for i, en := range s.heap {
			if int(en.l.hidx) != i+1 {
				t.Fatalf("entry %d's lock says it is at %d", i, en.l.hidx-1)
			}
		}
		l := s.pop()
		if _, ok := at[l]; !ok {
			t.Fatalf("popped a lock that was removed or never put")
		}
		got = append(got, at[l])
		delete(at, l)
	}
	if len(at) != 0 {
		t.Fatalf("%d locks put and not removed never came out", len(at))
	}
	if !slices.IsSorted(got) {
		t.Fatalf("the heap gave its locks out of order: %v", got)
	}
}

// Auto-extensions that fall due while every slot is out wait in line and go
// out in the order they fell due, not the order the locks were taken in.
// Eight locks are taken at one instant, in one order, with TTLs that make
// them due in another; one slot, held by the first due lock's extension
// until every other lock is due too. The masters then see the extensions
// in due order.
func TestSchedDueOrderThroughTheSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := schedEngine(t)
		SetAutoSlots(e, 1)
		ctx := context.Background()
		perm := []int{5, 2, 7, 0, 3, 6, 1, 4} // lock i is the perm[i]-th due
		want := make([]string, len(perm))
		var ls []api.Lock
		for i, p := range perm {
			key := fmt.Sprintf("k%d", i)
			l, err := e.TryLock(ctx, key, api.WithTTL(time.Second+time.Duration(p)*20*time.Millisecond), api.WithAutoExtend(0.5))
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
			want[p] = key
		}
		m.set(true)
		time.Sleep(600 * time.Millisecond) // every first extension is due (the last at 570 ms)
		synctest.Wait()
		if got := m.extended(); len(got) != 1 {
			t.Fatalf("with one slot %d extensions were out at once (%v)", len(got), got)
		}
		m.set(false)
		close(m.open)
		synctest.Wait()
		got := m.extended()
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("extensions went out in the order %v, want due order %v", got, want)
		}
		for i, l := range ls {
			if err := l.Err(); err != nil {
				t.Fatalf("lock %d lost: %v", i, err)
			}
		}
	})
}

// Unlock takes the lock out of the scheduler: nothing is left of it in the
// heap, and no extension of it is sent after. The same for a lock whose
// Done was watched without auto-extension, and for Close.
func TestSchedUnlockRemoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := schedEngine(t, api.WithTTL(time.Second))
		ctx := context.Background()
		auto, err := e.TryLock(ctx, "auto", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		watched, err := e.TryLock(ctx, "watched")
		if err != nil {
			t.Fatal(err)
		}
		_ = watched.Done()
		kept, err := e.TryLock(ctx, "kept", api.WithAutoExtend(0.5))
		if err != nil {
			t.Fatal(err)
		}
		if n := heapLen(e); n != 3 {
			t.Fatalf("%d locks scheduled, want 3", n)
		}
		for _, l := range []api.Lock{auto, watched} {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := heapLen(e); n != 1 {
			t.Fatalf("%d locks scheduled after two Unlocks, want the one still held", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		for _, k := range m.extended() {
			if k != "kept" {
				t.Fatalf("an extension of %q was sent after its Unlock", k)
			}
		}
		if len(m.extended()) == 0 {
			t.Fatal("the lock still held was never extended")
		}
		if err := kept.Err(); err != nil {
			t.Fatal(err)
		}
		_ = e.Close()
		if n := heapLen(e); n != 0 {
			t.Fatalf("%d locks still scheduled after Close", n)
		}
		<-kept.Done()
	})
}

// Many locks falling due at one instant start no goroutine each: the
// scheduler's line holds those past the slots, a worker per slot in use
// runs them, and when the masters answer every lock is extended and none
// lost. The old timer per lock started a goroutine per due lock, parked
// on the slots.
func TestSchedManyDueAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			locks = 2000
			slots = 8
			ttl   = time.Second
		)
		// Eight batches in flight: a node sends each op as it comes, so a
		// master sees every extension whose call is out, unless two of the
		// eight keys share a slot of the node's in-flight table (hashed with
		// a seed drawn per process): the second then waits for the first's
		// batch, which the gate holds (below).
		e, m := schedEngine(t, api.WithTTL(ttl), api.WithBatching(512, slots))
		SetAutoSlots(e, slots)
		ctx := context.Background()
		ls := make([]api.Lock, locks)
		for i := range ls {
			l, err := e.TryLock(ctx, fmt.Sprintf("k%d", i), api.WithAutoExtend(0.5))
			if err != nil {
				t.Fatal(err)
			}
			ls[i] = l
		}
		first := ls[0].Until()
		m.set(true)
		synctest.Wait()
		before := runtime.NumGoroutine()
		time.Sleep(ttl * 6 / 10) // every first extension is due
		synctest.Wait()
		// One shared slot among eight keys in 4096 slots happens in about
		// 0.7 % of processes (it made this check fail in 5 of 1086 runs);
		// two, which one short of slots-1 would need, in about 0.002 %.
		if n := len(m.extended()); n > slots || n < slots-1 {
			t.Fatalf("%d extensions reached the master with %d slots out", n, slots)
		}
		if d := runtime.NumGoroutine() - before; d > slots+4 {
			t.Fatalf("%d more goroutines with %d locks due and %d slots: a goroutine per due lock", d, locks, slots)
		}
		e.sched.lmu.Lock()
		waiting, out := len(e.sched.line)-e.sched.head, e.sched.out
		e.sched.lmu.Unlock()
		if waiting != locks-slots || out != slots {
			t.Fatalf("%d in line and %d out, want %d and %d", waiting, out, locks-slots, slots)
		}
		m.set(false)
		close(m.open)
		synctest.Wait()
		for i, l := range ls {
			if err := l.Err(); err != nil {
				t.Fatalf("lock %d lost: %v", i, err)
			}
			if !l.Until().After(first) {
				t.Fatalf("lock %d not extended", i)
			}
		}
		e.sched.lmu.Lock()
		waiting, out = len(e.sched.line)-e.sched.head, e.sched.out
		e.sched.lmu.Unlock()
		if waiting != 0 || out != 0 {
			t.Fatalf("%d in line and %d out once every lock is extended", waiting, out)
		}
	})
}
