package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// A twin (an entry that reaches another entry's server) answers and may
// not vote, as a master in restart quarantine or unsafe does: its answers
// count as redlock.master.ops result=quarantined and it reads voting=0, so
// redlock.master.quarantined must read 1 for it too (OBSERVABILITY.md: "1
// while the master does not vote"). With 0, reachable=1 quarantined=0
// voting=0 would read as a master whose info could not be checked. Once
// the entries part, the one left votes again and reads 0.
func TestTwinGaugesAgree(t *testing.T) {
	const ttl = 10 * time.Second
	tm := newTelemetry(t)
	m0, m2, m3 := memory.New(), memory.New(), memory.New()
	x := newFlipper("x", time.Hour, m0)
	y := newFlipper("y", time.Hour, m0, m3)
	y.to(-1) // down at construction, so New cannot refuse the pair
	z := newFlipper("z", time.Hour, m2)
	e, err := engine.NewWithTransports([]transport.Transport{x, y, z}, append(tm.opts, api.WithTTL(ttl), api.WithRestartQuarantine(ttl),
		api.WithMasterTimeout(time.Second), api.WithLogger(slog.New(slog.DiscardHandler)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	hold(t, "k", time.Hour, m2) // z refuses k: every TryLock of k waits for y

	y.to(0) // y reaches x's server
	for attempt := 0; ; attempt++ {
		l, err := e.TryLock(ctx, "k")
		if err == nil {
			_ = l.Unlock(ctx)
			t.Fatal("granted while z refuses and x and y reach one server")
		}
		if errors.Is(masterErr(t, err, "x"), api.ErrInvalidArgument) {
			break
		}
		if attempt == 100 {
			t.Fatalf("x still votes after %d attempts with y on its server: %v", attempt, err)
		}
	}
	ms := tm.collect(t)
	for _, m := range []string{"x", "y"} {
		wantValue(t, ms, 1, "redlock.master.reachable", "redlock.master="+m)
		wantValue(t, ms, 0, "redlock.master.voting", "redlock.master="+m)
		wantValue(t, ms, 1, "redlock.master.quarantined", "redlock.master="+m)
	}
	if n, _ := sel(ms, "redlock.master.ops", "redlock.master=x", "redlock.result=quarantined"); n == 0 {
		t.Errorf("x's answers as a twin are not counted as redlock.master.ops result=quarantined")
	}
	wantValue(t, ms, 0, "redlock.master.quarantined", "redlock.master=z")

	// y moves to a server of its own: it sits out a restart quarantine
	// there, and x, alone on its server again, votes.
	y.to(1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := e.TryLock(ctx, "k2")
		if err == nil {
			_ = l.Unlock(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("x and z do not vote once y reaches another server: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ms = tm.collect(t)
	wantValue(t, ms, 1, "redlock.master.voting", "redlock.master=x")
	wantValue(t, ms, 0, "redlock.master.quarantined", "redlock.master=x")
}
