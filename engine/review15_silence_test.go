package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// Masters that are really down (the connection refused) fail at once: with
// a TTL of a minute, a TryLock and an Unlock meeting three partitioned
// masters (transport.ErrUnavailable) report ErrQuorumUnreachable within a
// few master timeouts, not after waiting out the TTL as for silent ones.
func TestRefusedMastersFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fs, _ := slowMasters(t, api.WithTTL(time.Minute))
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every master has the key
		for _, f := range fs[:3] {
			f.Partition(time.Hour)
		}
		t0 := time.Now()
		if _, err := e.TryLock(ctx, "refused"); !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("TryLock with three masters refusing connections: %v, want ErrQuorumUnreachable", err)
		}
		if took := time.Since(t0); took > time.Second {
			t.Fatalf("TryLock with three masters refusing connections took %v, want a few master timeouts", took)
		}
		t0 = time.Now()
		if err := l.Unlock(ctx); !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("Unlock with three masters refusing connections: %v, want ErrQuorumUnreachable", err)
		}
		if took := time.Since(t0); took > time.Second {
			t.Fatalf("Unlock with three masters refusing connections took %v, want a few master timeouts", took)
		}
		for _, f := range fs[:3] {
			f.Heal()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock again once the masters are back: %v", err)
		}
	})
}

// An Unlock whose context has no deadline, with three masters silent for
// good: the slow releases are sent again only until the masters have been
// silent for the lock's TTL; then the Unlock reports ErrQuorumUnreachable
// (ARCHITECTURE.md: an Unlock with a paused majority waits up to a TTL).
func TestSilentMastersUnlockEndsWithinTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 2 * time.Second
		e, fs, _ := slowMasters(t, api.WithTTL(ttl))
		defer e.Close()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "silent-unlock")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs[:3] {
			f.Pause()
		}
		t0 := time.Now()
		if err := l.Unlock(ctx); !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("Unlock with three masters silent for good: %v, want ErrQuorumUnreachable", err)
		}
		if took := time.Since(t0); took > ttl+time.Second {
			t.Fatalf("Unlock with three masters silent for good took %v: longer than their TTL of silence and a resend", took)
		}
		for _, f := range fs[:3] {
			f.Resume()
		}
	})
}

// unanswered is a master that never answers a batch holding an op that
// matches (it holds the batch until the batch's own context ends), while
// every other batch is answered: one key whose shard is paused behind a
// transport that serves several, or a master that answers no extension.
type unanswered struct {
	transport.Transport
	match func(transport.Op) bool
}

func (u unanswered) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	if slices.ContainsFunc(ops, u.match) {
		<-ctx.Done()
		return transport.Fail(res, ctx.Err())
	}
	return u.Transport.Do(ctx, ops, res)
}

// The silence that makes a slow master down must be the silence of what
// the call waits on. Three masters never answer key "dead" but answer
// everything else, and another goroutine keeps locking another key: a
// TryLock of "dead" with no deadline must still end, with
// ErrQuorumUnreachable, within about the TTL, not be retried as overload
// for as long as the other key's answers keep the masters "alive".
func TestSilentKeyIsUnreachableDespiteOtherTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		_, ts := memoryMasters(5)
		for i := range 3 {
			ts[i] = unanswered{ts[i], func(op transport.Op) bool { return op.Key == "dead" }}
		}
		e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(100*time.Millisecond), api.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if l, err := e.TryLock(context.Background(), "alive"); err == nil {
					_ = l.Unlock(context.Background())
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 20*ttl)
		defer cancel()
		t0 := time.Now()
		_, err = e.TryLock(ctx, "dead")
		took := time.Since(t0)
		close(stop)
		wg.Wait()
		if !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("TryLock of a key three masters never answer, other keys answered: %v after %v; want ErrQuorumUnreachable within about the TTL (%v)", err, took, ttl)
		}
		if took > 3*ttl {
			t.Fatalf("TryLock of a key three masters never answer took %v, want about the TTL (%v)", took, ttl)
		}
	})
}
