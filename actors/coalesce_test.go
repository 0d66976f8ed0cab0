package actors

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// slowRTT is a real in-memory master behind a fixed round trip (fake time
// in a synctest bubble); it records when each batch arrived and its size.
type slowRTT struct {
	transport.Transport
	rtt  time.Duration
	t0   time.Time
	mu   sync.Mutex
	seen []arrival
}

type arrival struct {
	at   time.Duration // since t0
	size int
}

func (s *slowRTT) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	s.mu.Lock()
	s.seen = append(s.seen, arrival{at: time.Since(s.t0), size: len(ops)})
	s.mu.Unlock()
	time.Sleep(s.rtt)
	return s.Transport.Do(ctx, ops, res)
}

// since returns the batches that arrived from the i-th on.
func (s *slowRTT) since(i int) []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.seen[i:]...)
}

func (s *slowRTT) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// acquireAll submits n acquires of fresh keys and returns them.
func acquireAll(t *testing.T, c *Cluster, prefix string, n int) []*Call {
	t.Helper()
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = NewCall(Acquire, "trylock", fmt.Sprintf("%s-%d", prefix, i), "v", time.Minute, time.Millisecond)
		calls[i].Retry = api.DefaultOptions().Retry
		calls[i].Retry.MaxAttempts = 1
		if err := c.Submit(calls[i]); err != nil {
			t.Fatal(err)
		}
	}
	return calls
}

func waitAll(t *testing.T, calls []*Call) {
	t.Helper()
	for _, call := range calls {
		<-call.Done()
		if call.Err != nil {
			t.Fatalf("%s: %v", call.Key, call.Err)
		}
	}
}

// fill makes the node send a batch of size ops: one op goes out alone, the
// others queue behind it and go out together when it returns. It returns
// once that batch has returned and the node has settled.
func fill(t *testing.T, c *Cluster, m *slowRTT, prefix string, size int) {
	t.Helper()
	first := acquireAll(t, c, prefix+"-first", 1)
	synctest.Wait() // the lone op is in flight
	rest := acquireAll(t, c, prefix, size)
	waitAll(t, first)
	waitAll(t, rest)
	synctest.Wait()
	if got := m.since(m.count() - 1); got[0].size != size {
		t.Fatalf("the last batch before the test carried %d ops; want %d", got[0].size, size)
	}
}

func TestCoalesceAfterLargeBatch(t *testing.T) {
	t.Run("a lone op waits half the round trip", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &slowRTT{Transport: memory.New().Transport(), rtt: time.Millisecond, t0: time.Now()}
			c := start(t, []transport.Transport{m}, time.Second, 1)
			fill(t, c, m, "a", 20)
			n, t1 := m.count(), time.Since(m.t0)
			waitAll(t, acquireAll(t, c, "lone", 1))
			got := m.since(n)
			if len(got) != 1 || got[0].size != 1 || got[0].at-t1 != time.Millisecond/2 {
				t.Fatalf("after a batch of 20 returned at %v, a lone op was sent as %+v; want one batch of 1 at +500µs", t1, got)
			}
		})
	})
	t.Run("the ops of a wave go out together at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &slowRTT{Transport: memory.New().Transport(), rtt: time.Millisecond, t0: time.Now()}
			c := start(t, []transport.Transport{m}, time.Second, 1)
			fill(t, c, m, "a", 20)
			n, t1 := m.count(), time.Since(m.t0)
			waitAll(t, acquireAll(t, c, "wave", 20))
			got := m.since(n)
			if len(got) != 1 || got[0].size != 20 || got[0].at != t1 {
				t.Fatalf("after a batch of 20 returned at %v, 20 new ops were sent as %+v; want one batch of 20 at once", t1, got)
			}
		})
	})
	t.Run("no wait after a small batch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &slowRTT{Transport: memory.New().Transport(), rtt: time.Millisecond, t0: time.Now()}
			c := start(t, []transport.Transport{m}, time.Second, 1)
			fill(t, c, m, "a", coalesceMin-1)
			n, t1 := m.count(), time.Since(m.t0)
			waitAll(t, acquireAll(t, c, "lone", 1))
			if got := m.since(n); len(got) != 1 || got[0].at != t1 {
				t.Fatalf("after a batch of %d returned at %v, a lone op was sent as %+v; want at once", coalesceMin-1, t1, got)
			}
		})
	})
	t.Run("no wait on a master that answers within 50µs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &slowRTT{Transport: memory.New().Transport(), rtt: 40 * time.Microsecond, t0: time.Now()}
			c := start(t, []transport.Transport{m}, time.Second, 1)
			fill(t, c, m, "a", 20)
			n, t1 := m.count(), time.Since(m.t0)
			waitAll(t, acquireAll(t, c, "lone", 1))
			if got := m.since(n); len(got) != 1 || got[0].at != t1 {
				t.Fatalf("after a batch of 20 returned from a 40µs master at %v, a lone op was sent as %+v; want at once", t1, got)
			}
		})
	})
	t.Run("closing does not wait for the hold", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := &slowRTT{Transport: memory.New().Transport(), rtt: time.Millisecond, t0: time.Now()}
			c := start(t, []transport.Transport{m}, time.Second, 1)
			fill(t, c, m, "a", 20)
			n, t1 := m.count(), time.Since(m.t0)
			lone := acquireAll(t, c, "lone", 1)
			synctest.Wait() // queued and held
			done := make(chan error, 1)
			go func() { done <- c.Close() }()
			<-lone[0].Done()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// The held SET goes out at once; its cleanup follows it.
			if got := m.since(n); len(got) == 0 || got[0].at != t1 {
				t.Fatalf("while closing, the held batch was sent as %+v; want the first at once (%v)", got, t1)
			}
		})
	})
}
