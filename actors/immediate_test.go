package actors

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// onCaller is a memory master that counts its Do calls, and those that ran
// on the goroutine of a Cluster.Submit, the caller's. immediate is what
// it answers to transport.Immediate (a test wraps it in hidden to take the
// method away).
type onCaller struct {
	transport.Transport
	immediate     bool
	calls, inline atomic.Int32
	applied       chan int // each Do's op count, once applied
	ops           int      // the test's sum of applied (settle)
}

func (o *onCaller) Immediate() bool { return o.immediate }

func (o *onCaller) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	o.calls.Add(1)
	buf := make([]byte, 64<<10)
	if bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("actors.(*Cluster).Submit")) {
		o.inline.Add(1)
	}
	err := o.Transport.Do(ctx, ops, res)
	o.applied <- len(ops)
	return err
}

// settle waits until o has applied want ops in all: a call is over at a
// quorum, and its last masters may still be answering it.
func (o *onCaller) settle(t *testing.T, want int) {
	t.Helper()
	for o.ops < want {
		select {
		case n := <-o.applied:
			o.ops += n
		case <-time.After(10 * time.Second):
			t.Fatalf("%d ops applied, waiting for %d", o.ops, want)
		}
	}
}

// idleBy waits until mb is idle with nothing queued: there is no event to
// wait on, so it yields until then, for at most 10s.
func idleBy(t *testing.T, mb *mailbox) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for mb.status.Load() != idle || mb.userN.Load() != 0 {
		if time.Now().After(end) {
			t.Fatal("a coordinator's mailbox stayed busy for 10s")
		}
		runtime.Gosched()
	}
}

const immTTL, immDrift = 10 * time.Second, time.Millisecond

// hidden is a transport that forwards Do and Close only, as a wrapper that
// embeds transport.Transport does.
type hidden struct{ transport.Transport }

// A lone call on masters whose Do never waits (transport.Immediate) runs
// to the end on the caller's goroutine: its batches are not handed to the
// nodes' I/O goroutines and back. Masters that do not say so, or say
// false, never see a Do on a caller's goroutine, whose Submit must not
// wait on a network.
func TestLoneCallOnImmediateMastersRunsOnTheCaller(t *testing.T) {
	for _, tc := range []struct {
		name      string
		immediate bool
		hide      bool
	}{
		{"immediate", true, false},
		{"says false", false, false},
		{"no Immediate method", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := make([]*onCaller, 5)
			ts := make([]transport.Transport, 5)
			for i := range ms {
				ms[i] = &onCaller{Transport: memory.New().Transport(), immediate: tc.immediate, applied: make(chan int, 64)}
				ts[i] = ms[i]
				if tc.hide {
					ts[i] = hidden{ms[i]}
				}
			}
			c := start(t, ts, time.Second, 1)
			// Each call starts once every master has answered the one
			// before (settle): with a batch of an earlier call still out,
			// a node sends the next from the goroutine that brings that
			// batch back. The first call may find a coordinator still
			// starting on a goroutine of protoactor's, and then runs
			// there: it only warms up.
			ops := 0
			call := func(kind CallKind, key string) {
				t.Helper()
				if err := run(t, c, NewCall(kind, "op", key, "v", immTTL, immDrift)); err != nil {
					t.Fatal(err)
				}
				ops++
				for _, m := range ms {
					m.settle(t, ops)
				}
				// A call that ran on a coordinator's own goroutine (the
				// warm-up) is over at a quorum, and that goroutine may
				// still be handling the last replies: the next call would
				// queue behind them and run there. Wait until it lets go.
				for _, mb := range c.coordMBs {
					idleBy(t, mb)
				}
			}
			call(Acquire, "warm-up")
			call(Release, "warm-up")
			for _, m := range ms {
				m.calls.Store(0)
				m.inline.Store(0)
			}
			for i := range 20 {
				key := fmt.Sprintf("k%d", i)
				call(Acquire, key)
				call(Release, key)
			}
			for i, m := range ms {
				calls, inline := m.calls.Load(), m.inline.Load()
				if calls != 40 {
					t.Fatalf("master %d: %d Do calls for 20 acquires and 20 releases, one at a time", i, calls)
				}
				want := int32(0)
				if tc.immediate && !tc.hide {
					want = calls
				}
				if inline != want {
					t.Errorf("master %d: %d of %d Do calls ran on the caller's goroutine; want %d", i, inline, calls, want)
				}
			}
		})
	}
}

// Calls in flight together on immediate masters go through the I/O
// goroutines as before, in batches, and every one is answered right: each
// acquire of its own key is granted, each release frees it.
func TestConcurrentCallsOnImmediateMasters(t *testing.T) {
	ms := make([]*onCaller, 5)
	ts := make([]transport.Transport, 5)
	for i := range ms {
		ms[i] = &onCaller{Transport: memory.New().Transport(), immediate: true, applied: make(chan int, 1<<14)}
		ts[i] = ms[i]
	}
	c := start(t, ts, time.Second, 1)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				key := fmt.Sprintf("g%d-%d", g, i)
				if err := run(t, c, NewCall(Acquire, "trylock", key, "v", immTTL, immDrift)); err != nil {
					t.Error(err)
					return
				}
				if err := run(t, c, NewCall(Release, "unlock", key, "v", 0, 0)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, m := range ms {
		// The last releases are over at a quorum: two masters may still
		// be applying theirs.
		m.settle(t, 64*50*2)
		res := make([]transport.Result, 1)
		for g := range 64 {
			for j := range 50 {
				key := fmt.Sprintf("g%d-%d", g, j)
				// A fresh SET of every key must succeed: none was left.
				if err := m.Transport.Do(context.Background(), []transport.Op{{Kind: transport.Acquire, Key: key, Value: "probe", TTL: immTTL}}, res); err != nil || !res[0].OK {
					t.Fatalf("master %d: key %s left after its release (%v, %+v)", i, key, err, res[0])
				}
			}
		}
	}
}
