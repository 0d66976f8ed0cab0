package actors

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// stamped records when each Do began, on a real clock.
type stamped struct {
	transport.Transport
	mu    sync.Mutex
	began []time.Time
}

func (s *stamped) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	s.mu.Lock()
	s.began = append(s.began, time.Now())
	s.mu.Unlock()
	return s.Transport.Do(ctx, ops, res)
}

// A grant's validity counts from no later than the master got the SET: the
// batch's send time is read before the transport's Do begins (node.flush),
// so Start + Validity never passes that Do's start + TTL - drift, and a
// batch's deadline is no later than its own timer.
func TestValidityCountsFromBeforeTheSend(t *testing.T) {
	const ttl, drift = 10 * time.Second, time.Millisecond
	for i := range 50 {
		s := &stamped{Transport: memory.New().Transport()}
		c := start(t, []transport.Transport{s}, time.Second, 1)
		call := NewCall(Acquire, "trylock", "k", "v", ttl, drift)
		if err := run(t, c, call); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		first := s.began[0]
		s.mu.Unlock()
		if end, bound := call.Start.Add(call.Validity), first.Add(ttl-drift); end.After(bound) {
			t.Fatalf("round %d: validity ends %v after the SET's Do began + TTL - drift", i, end.Sub(bound))
		}
		_ = c.Close()
	}
}

// armAt's deadline is sent + timeout, however late the arming.
func TestArmAtDeadlineFromSend(t *testing.T) {
	d := newDeadline()
	defer d.timer.Stop()
	sent := time.Now().Add(-time.Second)
	d.armAt(sent, time.Hour)
	if at, ok := d.Deadline(); !ok || !at.Equal(sent.Add(time.Hour)) {
		t.Fatalf("Deadline() = %v, %v; want sent + 1h", at, ok)
	}
	if !d.disarm() {
		t.Fatal("the timer fired early")
	}
}
