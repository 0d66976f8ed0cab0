package actors

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// interloper is master 1 of TestLateGrantIsNotCountedInTheNextAttempt: it
// holds the first batch with an acquire until let is closed, and in the
// batch that carries the failed attempt's release and the next attempt's
// SET it lets another client take the key between the two, as a real
// master may, since they are separate commands.
type interloper struct {
	m     *memory.Master
	let   chan struct{}
	first bool
}

func (s *interloper) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	t := s.m.Transport()
	if !s.first && slices.ContainsFunc(ops, func(op transport.Op) bool { return op.Kind == transport.Acquire }) {
		s.first = true
		select {
		case <-s.let:
		case <-ctx.Done():
			return transport.Fail(res, ctx.Err())
		}
		return t.Do(ctx, ops, res)
	}
	for i := range ops {
		if err := t.Do(ctx, ops[i:i+1], res[i:i+1]); err != nil {
			return err
		}
		if ops[i].Kind == transport.Release {
			one := make([]transport.Result, 1)
			_ = t.Do(ctx, []transport.Op{{Kind: transport.Acquire, Key: ops[i].Key, Value: "y", TTL: time.Hour}}, one)
		}
	}
	return nil
}

func (s *interloper) Close() error { return nil }

// A reply carries the attempt it answers (opRequest.seq), and a late one is
// dropped: counted into the next attempt, a grant that the failed attempt's
// own release is about to delete made a majority of one. Attempt 1's SET is
// held on master 1 while masters 2 and 3 refuse it (another client holds
// the key there); the attempt fails and, in its backoff, master 2 is freed.
// Attempt 2 gets master 2's grant and master 3's refusal, and master 1's
// late grant of attempt 1 arrives. Then master 1 applies attempt 1's release
// and, before attempt 2's SET, a third client takes the key. Counting the
// late grant, the call "won" with its value on master 2 alone.
func TestLateGrantIsNotCountedInTheNextAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := []*memory.Master{memory.New(), memory.New(), memory.New()}
		il := &interloper{m: ms[0], let: make(chan struct{})}
		ts := []transport.Transport{il, ms[1].Transport(), ms[2].Transport()}
		for _, m := range ms[1:] {
			res := make([]transport.Result, 1)
			_ = m.Transport().Do(context.Background(), []transport.Op{{Kind: transport.Acquire, Key: "k", Value: "x", TTL: time.Hour}}, res)
		}
		c := start(t, ts, time.Second, 1)
		call := NewCall(Acquire, "lock", "k", "v", time.Minute, time.Millisecond)
		call.Retry = api.Retry{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 10 * time.Millisecond, Multiplier: 1}
		if err := c.Submit(call); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // attempt 1 refused by masters 2 and 3; its backoff runs
		res := make([]transport.Result, 1)
		_ = ms[1].Transport().Do(context.Background(), []transport.Op{{Kind: transport.Release, Key: "k", Value: "x"}}, res)
		time.Sleep(20 * time.Millisecond)
		synctest.Wait() // attempt 2: master 2 granted, master 3 refused
		close(il.let)
		<-call.Done()
		holders := 0
		for _, m := range ms {
			if v, ok := m.Get("k"); ok && v == "v" {
				holders++
			}
		}
		if call.Err == nil && holders < 2 {
			t.Fatalf("the call won, but only %d of 3 masters hold its value (attempts: %d)", holders, call.attempts)
		}
		t.Logf("after %d attempts: %v", call.attempts, call.Err)
		if call.Err == nil {
			t.Fatalf("the call won; master 1 is held by another client and master 3 by a third, so it cannot hold a majority")
		}
	})
}
