package floor_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/bench/floor"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every variant runs whole cycles on five in-memory masters from many
// goroutines: each acquire is granted by every master and each release
// deletes the key again, so no key is left, and Close stops every
// goroutine (goleak).
func TestVariantsRunWholeCycles(t *testing.T) {
	for _, v := range []floor.Variant{
		{Node: floor.Worker},
		{Node: floor.Worker, InlineCoordinator: true},
		{Node: floor.Worker, InlineCoordinator: true, Request: true},
		{Node: floor.Worker, ProtoMailbox: true, GoroutineNode: true},
		{Node: floor.SelfFlush},
		{Node: floor.SelfFlush, InlineCoordinator: true, Coordinators: 1},
		{Node: floor.PerOp, Coordinators: 4},
	} {
		t.Run(v.Name(), func(t *testing.T) {
			masters := make([]*memory.Master, 5)
			ts := make([]transport.Transport, 5)
			for i := range masters {
				masters[i] = memory.New()
				ts[i] = masters[i].Transport()
			}
			s, err := floor.New(ts, v)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for g := range 16 {
				wg.Go(func() {
					for i := range 200 {
						if err := s.Cycle(context.Background(), fmt.Sprintf("k%d-%d", g, i), false); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			s.Close()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for i, m := range masters {
				if n := m.Len(); n != 0 {
					t.Errorf("master %d holds %d keys after every cycle released its own", i, n)
				}
			}
		})
	}
}

// A key already held on a majority is refused: the skeleton reports it
// rather than count a refusal as a grant.
func TestRefusedAcquireFails(t *testing.T) {
	ts := make([]transport.Transport, 5)
	for i := range ts {
		m := memory.New()
		ts[i] = m.Transport()
		if i < 3 {
			res := make([]transport.Result, 1)
			if err := ts[i].Do(context.Background(), []transport.Op{{Kind: transport.Acquire, Key: "held", Value: "other", TTL: time.Hour}}, res); err != nil || !res[0].OK {
				t.Fatalf("seeding master %d: %v %+v", i, err, res[0])
			}
		}
	}
	s, err := floor.New(ts, floor.Variant{Node: floor.Worker})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Cycle(context.Background(), "held", false); err == nil {
		t.Fatal("a cycle on a key held on 3 of 5 masters succeeded")
	}
}

// BenchmarkMandatoryLockWork is the lock work the skeleton leaves out but
// no Redlock engine can: per cycle, an unguessable value (128 bits from
// crypto/rand, base64, as the engine draws it), the clock read when the
// acquire goes out and when the majority is counted (validity = TTL -
// elapsed - drift), and a handle for the caller (one allocation). A lower
// bound on what a real engine adds to BenchmarkFloor per cycle.
func BenchmarkMandatoryLockWork(b *testing.B) {
	b.ReportAllocs()
	var sink *handle
	for b.Loop() {
		h := &handle{}
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		base64.RawURLEncoding.Encode(h.value[:], raw[:])
		t1 := time.Now()
		h.validity = time.Minute - time.Since(t1) - time.Millisecond
		sink = h
	}
	_ = sink
}

type handle struct {
	value    [22]byte
	validity time.Duration
}
