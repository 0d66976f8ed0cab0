package engine_test

import (
	"context"
	"errors"
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
