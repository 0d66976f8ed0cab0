package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// lateGrantMaster applies every batch at once but hands its answer back
// only after the batch's deadline has passed, by late: what the Redis
// transport's late wait does with a reply that reached the socket before
// the deadline and was decoded after it (a starved reader).
type lateGrantMaster struct {
	transport.Transport
	late time.Duration
}

func (m *lateGrantMaster) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	err := m.Transport.Do(ctx, ops, res)
	<-ctx.Done()
	time.Sleep(m.late)
	return err
}

// A grant counted after the master timeout (the late wait) only shortens
// the lock (ARCHITECTURE, "The client's own lateness is not the master's
// silence"): validity counts from the send, never from when the answer was
// read. Every master applies the SET at the send and answers 300ms after
// its 100ms deadline: the lock's Until is send + TTL - drift. Answers read
// after that point must not make a lock at all: its keys may have expired.
func TestLateGrantOnlyShortensTheLock(t *testing.T) {
	const (
		ttl     = time.Second
		timeout = 100 * time.Millisecond
	)
	drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
	for _, tc := range []struct {
		name string
		late time.Duration
		ok   bool
	}{
		{"read 400ms after the send", 300 * time.Millisecond, true},
		{"read after the keys may have expired", ttl, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, ts := memoryMasters(5)
				for i := range ts {
					ts[i] = &lateGrantMaster{Transport: ts[i], late: tc.late}
				}
				e, err := engine.NewWithTransports(ts, api.WithoutRestartQuarantine(), api.WithMasterTimeout(timeout))
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				t0 := time.Now()
				l, err := e.TryLock(context.Background(), "late", api.WithTTL(ttl))
				if !tc.ok {
					if err == nil {
						t.Fatalf("a lock whose grants were read %v after the send, past its TTL less drift: Until %v", time.Since(t0), l.Until().Sub(t0))
					}
					if !errors.Is(err, api.ErrQuorumUnreachable) {
						t.Errorf("TryLock = %v; want the grants reported too late (unreachable)", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("TryLock with grants read late: %v", err)
				}
				defer func() { _ = l.Unlock(context.Background()) }()
				if took := time.Since(t0); took != timeout+tc.late {
					t.Fatalf("TryLock took %v, want the late answers' %v", took, timeout+tc.late)
				}
				if want := t0.Add(ttl - drift); !l.Until().Equal(want) {
					t.Fatalf("Until is %v after the send, want %v (TTL less drift, from the send): a late answer lengthened the lock",
						l.Until().Sub(t0), want.Sub(t0))
				}
			})
		})
	}
}
