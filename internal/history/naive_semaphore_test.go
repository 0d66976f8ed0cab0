package history_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/redistest"
)

// naiveAcquire is the design of the redis-semaphore npm package's
// RedlockSemaphore, kept here only as the control that shows the checker
// bites: every master keeps a counter of holders (a sorted set scored by
// expiry) and admits one while it has fewer than limit; a holder admitted
// by a majority holds a permit. Each master is right about itself, and
// the semaphore is still wrong: majorities of different holders need not
// meet on a master that counted them all.
const naiveAcquire = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0`

func naiveSemaphore(t *testing.T, reach []*redistest.Server, name string, limit int, holder string, ttl time.Duration) bool {
	t.Helper()
	now := time.Now().UnixMilli()
	votes := 0
	for _, s := range reach {
		var ok int
		s.Do(t, &ok, "EVAL", naiveAcquire, "1", name, strconv.FormatInt(now, 10), strconv.Itoa(limit),
			strconv.FormatInt(now+ttl.Milliseconds(), 10), holder, strconv.FormatInt(ttl.Milliseconds(), 10))
		votes += ok
	}
	return votes >= 3/2+1 // a majority of the three masters
}

// TestNaiveSemaphoreBites: three masters A, B, C, two permits, and three
// clients each cut off from one master (a partition that leaves every
// client a majority): x reaches {A,B}, y {B,C}, z {A,C}. The naive
// per-master counter admits all three, each master having counted only
// two, and the checker reports three holders of two permits. Run on the
// same masters and the same partition, the slot semaphore admits two and
// refuses the third, and the checker is quiet.
func TestNaiveSemaphoreBites(t *testing.T) {
	servers := redistest.Start(t, 4)
	a, b, c := servers[0], servers[1], servers[2]
	servers[3].Kill() // its address stands for the master a client cannot reach
	cut := servers[3].Addr
	const ttl = time.Minute
	pattern := []struct {
		holder  string
		reach   []*redistest.Server
		masters []string // for the engine: the unreachable master in its place
	}{
		{"x", []*redistest.Server{a, b}, []string{a.Addr, b.Addr, cut}},
		{"y", []*redistest.Server{b, c}, []string{cut, b.Addr, c.Addr}},
		{"z", []*redistest.Server{a, c}, []string{a.Addr, cut, c.Addr}},
	}

	rec := history.NewRecorder()
	log := rec.Log()
	for _, p := range pattern {
		if !naiveSemaphore(t, p.reach, "naive", 2, p.holder, ttl) {
			t.Fatalf("naive: %s was not admitted by its majority", p.holder)
		}
		at := rec.Now()
		log.Add(history.Grant{Key: "naive#" + p.holder, Holder: p.holder, GrantedAt: at, ValidUntil: at + ttl, Semaphore: "naive", Permits: 2})
	}
	for _, s := range []*redistest.Server{a, b, c} {
		var n int
		s.Do(t, &n, "ZCARD", "naive")
		if n != 2 {
			t.Fatalf("%s counted %d holders; the pattern needs each master to admit exactly 2", s.Addr, n)
		}
	}
	vs := history.Check(rec.History())
	if len(vs) != 1 || vs[0].Kind != history.TooManyHolders {
		t.Fatalf("checker on the naive semaphore: %v; want one %q violation", vs, history.TooManyHolders)
	}
	t.Logf("the checker bites: %v", vs[0])

	// The same pattern against the slot semaphore.
	rec = history.NewRecorder()
	log = rec.Log()
	ctx := context.Background()
	var admitted []string
	for _, p := range pattern {
		e, err := engine.New(p.masters, api.WithoutRestartQuarantine(), api.WithMasterTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		l, err := tryWhenReady(ctx, e, "ours")
		switch {
		case err == nil:
			at := rec.Now()
			log.Add(history.Grant{Key: l.Key(), Holder: p.holder, GrantedAt: at, ValidUntil: rec.At(l.Until()), Semaphore: "ours", Permits: 2})
			admitted = append(admitted, p.holder)
		case errors.Is(err, api.ErrNotAcquired):
		default:
			t.Fatalf("%s: %v", p.holder, err)
		}
	}
	if len(admitted) != 2 {
		t.Fatalf("slot semaphore admitted %v; want two of the three", admitted)
	}
	if vs := history.Check(rec.History()); len(vs) != 0 {
		t.Fatalf("checker on the slot semaphore: %v", vs)
	}
}

// tryWhenReady makes one TrySemaphore once the engine's connections are
// up: a master still connecting answers "unavailable", which would stand
// for a third master cut off.
func tryWhenReady(ctx context.Context, e *engine.Engine, name string) (api.Lock, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := e.TrySemaphore(ctx, name, 2, api.WithTTL(time.Minute))
		if !errors.Is(err, api.ErrQuorumUnreachable) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(10 * time.Millisecond) // poll: the transports report no "connected" event
	}
}
