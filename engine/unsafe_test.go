package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// evicting is an in-memory master whose ServerInfo says it evicts keys
// while evicts is set, as a Redis master does after CONFIG SET
// maxmemory-policy allkeys-lru with a memory limit.
type evicting struct {
	transport.Transport
	evicts *atomic.Bool
}

func (t evicting) Name() string  { return t.Transport.(transport.Namer).Name() }
func (t evicting) Epoch() uint64 { return t.Transport.(transport.ServerReporter).Epoch() }
func (t evicting) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	si, err := t.Transport.(transport.ServerReporter).ServerInfo(ctx)
	if t.evicts.Load() {
		si.Eviction = "maxmemory-policy allkeys-lru with maxmemory 1000 bytes"
	}
	return si, err
}

// A master that evicted keys may lack keys of locks still valid once it
// stops evicting, as a restarted master does: with the quarantine on it
// votes again only a period after it was last seen evicting.
func TestEvictingMasterSitsOutAPeriodAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = 5 * time.Second // the check interval is 1s
		var evicts atomic.Bool
		var ts []transport.Transport
		for _, name := range []string{"a", "b", "c"} {
			ts = append(ts, evicting{memory.NewNamed(name).Transport(), &evicts})
		}
		e, err := engine.NewWithTransports(ts, api.WithTTL(period), api.WithRestartQuarantine(period))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		try := func() error {
			l, err := e.TryLock(ctx, "k")
			if err == nil {
				_ = l.Unlock(ctx)
			}
			return err
		}
		time.Sleep(period) // fresh masters sit out a period
		if err := try(); err != nil {
			t.Fatalf("past the first period: %v", err)
		}
		evicts.Store(true)
		time.Sleep(1100 * time.Millisecond) // a check has read it
		if err := try(); !errors.Is(err, api.ErrQuorumUnreachable) || unsafeAnswers(err, "allkeys-lru") < 2 {
			t.Fatalf("masters evicting: %v, want ErrQuorumUnreachable with ErrUnsafeMaster answers", err)
		}
		evicts.Store(false)
		time.Sleep(1100 * time.Millisecond) // a check has read it
		stopped := time.Now()
		err = try()
		var ae *api.Error
		quarantined := 0
		if errors.As(err, &ae) {
			for _, m := range ae.Masters {
				if errors.Is(m.Err, api.ErrQuarantined) {
					quarantined++
				}
			}
		}
		if quarantined < 2 { // the outcome is certain with two of three
			t.Fatalf("just after the masters stopped evicting: %v, want them in quarantine", err)
		}
		time.Sleep(period - time.Since(stopped) + 1100*time.Millisecond)
		if err := try(); err != nil {
			t.Fatalf("a period after the masters stopped evicting: %v", err)
		}
	})
}

// redlock.master.quarantined is 1 while a master does not vote: an unsafe
// one (ErrUnsafeMaster) as much as one in restart quarantine, or a
// dashboard shows a master that never votes as healthy (review observe).
func TestUnsafeMasterShowsAsNotVoting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		var evicts atomic.Bool
		evicts.Store(true)
		var ts []transport.Transport
		for _, name := range []string{"a", "b", "c"} {
			ts = append(ts, evicting{memory.NewNamed(name).Transport(), &evicts})
		}
		e, err := engine.NewWithTransports(ts, append([]api.Option{api.WithoutRestartQuarantine()}, tm.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if _, err := e.TryLock(context.Background(), "k"); !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("TryLock on evicting masters: %v, want ErrQuorumUnreachable", err)
		}
		synctest.Wait() // every node has learned its master's info
		wantValue(t, tm.collect(t), 1, "redlock.master.quarantined", "redlock.master=a")
		evicts.Store(false)
		time.Sleep(1100 * time.Millisecond) // a check has read it
		if l, err := e.TryLock(context.Background(), "k"); err != nil {
			t.Fatalf("TryLock once the masters stopped evicting (quarantine off): %v", err)
		} else {
			_ = l.Unlock(context.Background())
		}
		wantValue(t, tm.collect(t), 0, "redlock.master.quarantined", "redlock.master=a")
	})
}

// denying is an in-memory master whose ServerInfo is refused while deny is
// set, as a Redis master's is for an ACL user without +info.
type denying struct {
	transport.Transport
	deny *atomic.Bool
}

func (t denying) Name() string  { return t.Transport.(transport.Namer).Name() }
func (t denying) Epoch() uint64 { return t.Transport.(transport.ServerReporter).Epoch() }
func (t denying) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	if t.deny.Load() {
		return transport.ServerInfo{}, transport.Reply(errors.New("NOPERM User app has no permissions to run the 'info' command"))
	}
	return t.Transport.(transport.ServerReporter).ServerInfo(ctx)
}

// redlock.master.voting says whether a master counts towards the quorum,
// apart from whether it answers: masters whose info read is refused answer
// (reachable) and do not vote until a read gets through.
func TestMasterVotingGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		var deny atomic.Bool
		deny.Store(true)
		ts := []transport.Transport{
			denying{memory.NewNamed("a").Transport(), &deny},
			denying{memory.NewNamed("b").Transport(), &deny},
			memory.NewNamed("c").Transport(),
		}
		e, err := engine.NewWithTransports(ts, append([]api.Option{api.WithoutRestartQuarantine()}, tm.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		if _, err := e.TryLock(ctx, "k"); !errors.Is(err, api.ErrQuorumUnreachable) || unsafeAnswers(err, "NOPERM") != 2 {
			t.Fatalf("TryLock with two of three masters refusing their info: %v, want ErrQuorumUnreachable with their ErrUnsafeMaster answers", err)
		}
		synctest.Wait() // every answer and cleanup is in
		ms := tm.collect(t)
		for _, m := range []string{"a", "b"} {
			wantValue(t, ms, 1, "redlock.master.reachable", "redlock.master="+m)
			wantValue(t, ms, 0, "redlock.master.voting", "redlock.master="+m)
			wantValue(t, ms, 1, "redlock.master.quarantined", "redlock.master="+m)
			wantValue(t, ms, 1, "redlock.master.ops", "redlock.master="+m, "redlock.op=acquire", "redlock.result=quarantined")
			wantValue(t, ms, 0, "redlock.master.ops", "redlock.master="+m, "redlock.result=failed")
		}
		wantValue(t, ms, 1, "redlock.master.reachable", "redlock.master=c")
		wantValue(t, ms, 1, "redlock.master.voting", "redlock.master=c")
		wantValue(t, ms, 0, "redlock.master.quarantined", "redlock.master=c")

		deny.Store(false)
		time.Sleep(1100 * time.Millisecond) // a check has read them
		l, err := e.TryLock(ctx, "k")
		if err != nil {
			t.Fatalf("TryLock once the masters' info can be read: %v", err)
		}
		_ = l.Unlock(ctx)
		synctest.Wait()
		ms = tm.collect(t)
		wantValue(t, ms, 3, "redlock.master.voting")
		wantValue(t, ms, 3, "redlock.master.reachable")
		wantValue(t, ms, 0, "redlock.master.quarantined")
	})
}

// evictedCount is an in-memory master whose ServerInfo reports evicted
// as its evicted_keys, and no eviction policy: a Redis master switched to
// an evicting policy and back between two of the engine's reads.
type evictedCount struct {
	transport.Transport
	evicted *atomic.Uint64
}

func (t evictedCount) Name() string  { return t.Transport.(transport.Namer).Name() }
func (t evictedCount) Epoch() uint64 { return t.Transport.(transport.ServerReporter).Epoch() }
func (t evictedCount) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	si, err := t.Transport.(transport.ServerReporter).ServerInfo(ctx)
	si.Evicted = t.evicted.Load()
	return si, err
}

// evictedShard is evictedCount as a master of one shard (a Redis Cluster
// of one master), which the engine vets per shard.
type evictedShard struct{ evictedCount }

func (t evictedShard) DoServed(ctx context.Context, ops []transport.Op, res []transport.Result, served []transport.Served) error {
	e := t.Epoch()
	err := t.Do(ctx, ops, res)
	if t.Epoch() != e {
		e = transport.Unvetted
	}
	for i := range served {
		served[i] = transport.Served{Shard: "s0", Epoch: e}
	}
	return err
}
func (t evictedShard) ShardNames() []string     { return []string{"s0"} }
func (t evictedShard) Handoffs(string) uint64   { return 0 }
func (t evictedShard) ShardEpoch(string) uint64 { return t.Epoch() }
func (t evictedShard) ShardInfo(ctx context.Context, _ string) (transport.ServerInfo, error) {
	return t.ServerInfo(ctx)
}

// A master whose evicted_keys moved between two reads has dropped keys, a
// held lock's maybe among them, though neither read saw an eviction
// policy: with the quarantine on it sits out a period from the read that
// saw the change, as a master seen evicting does; with it off it does not
// vote on that read's word, and votes again at the next read that finds
// the count unchanged (the limit README states). A decrease (CONFIG
// RESETSTAT) counts too. Whole masters and shards alike.
func TestMasterThatEvictedSitsOut(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		for _, quarantine := range []bool{true, false} {
			name := map[bool]string{false: "server", true: "shard"}[sharded] + "/" + map[bool]string{true: "quarantine", false: "no-quarantine"}[quarantine]
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testEvictedSitsOut(t, sharded, quarantine) })
			})
		}
	}
}

func testEvictedSitsOut(t *testing.T, sharded, quarantine bool) {
	const period = 5 * time.Second // the check interval is 1s
	var evicted atomic.Uint64
	evicted.Store(7) // keys evicted before the engine's first read count for nothing
	var ts []transport.Transport
	for _, name := range []string{"a", "b", "c"} {
		m := evictedCount{memory.NewNamed(name).Transport(), &evicted}
		if sharded {
			ts = append(ts, evictedShard{m})
		} else {
			ts = append(ts, m)
		}
	}
	opts := []api.Option{api.WithTTL(period), api.WithRestartQuarantine(period)}
	if !quarantine {
		opts = []api.Option{api.WithoutRestartQuarantine()}
	}
	e, err := engine.NewWithTransports(ts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	try := func() error {
		l, err := e.TryLock(ctx, "k")
		if err == nil {
			_ = l.Unlock(ctx)
		}
		return err
	}
	if quarantine {
		time.Sleep(period) // fresh masters sit out a period
	}
	if err := try(); err != nil {
		t.Fatalf("with evicted_keys unchanged since the first read: %v", err)
	}
	for _, drop := range []uint64{9, 0} { // evictions, then CONFIG RESETSTAT
		evicted.Store(drop)
		changed := time.Now()
		time.Sleep(1100 * time.Millisecond) // a check has read it
		// With the quarantine on, a second check may have found the count
		// unchanged by now (where the checks fall against the change is
		// up to the bubble's schedule): the masters are then in the
		// quarantine the change started, and must say so.
		if err := try(); !errors.Is(err, api.ErrQuorumUnreachable) || evictedAnswers(err, quarantine) < 2 {
			t.Fatalf("evicted_keys moved to %d since the last read: %v, want ErrQuorumUnreachable with ErrUnsafeMaster answers naming evicted_keys (or, quarantine on, ErrQuarantined ones that do)", drop, err)
		}
		time.Sleep(1100 * time.Millisecond) // a check found it unchanged
		err := try()
		if !quarantine {
			if err != nil {
				t.Fatalf("quarantine off, a check after the one that saw evicted_keys move: %v, want the masters voting again", err)
			}
			continue
		}
		// In quarantine, and saying why: not "up for" a time, as after a
		// restart, since the process did not restart.
		if quarantinedAnswers(err) < 2 || evictedAnswers(err, true) < 2 {
			t.Fatalf("evicted_keys unchanged again, within a period of the change: %v, want the masters in quarantine, naming evicted_keys", err)
		}
		time.Sleep(period - time.Since(changed) + 1100*time.Millisecond)
		if err := try(); err != nil {
			t.Fatalf("a period after evicted_keys moved: %v", err)
		}
	}
}

// evictedAnswers counts the masters in err kept from voting for keys they
// evicted: an ErrUnsafeMaster naming evicted_keys, or, when quarantined is
// set, an ErrQuarantined that names it (the period an eviction started).
func evictedAnswers(err error, quarantined bool) int {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return 0
	}
	n := 0
	for _, m := range ae.Masters {
		kept := errors.Is(m.Err, api.ErrUnsafeMaster) || quarantined && errors.Is(m.Err, api.ErrQuarantined)
		if kept && strings.Contains(m.Err.Error(), "evicted_keys") {
			n++
		}
	}
	return n
}
