package torture

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/history"
)

// neverDone is a real lock whose lost-lock signal never reaches the holder:
// the engine bug the overrun rule exists for.
type neverDone struct{ api.Lock }

func (neverDone) Done() <-chan struct{} { return nil }

// stalled makes a probe's hook that keeps the probe unrun from the moment
// *from (on the history's timebase; 0: not yet set) until *to: its wake-ups
// due in that span run only at *to, as on a process denied the CPU then.
func stalled(now func() time.Duration, from, to *atomic.Int64) func(time.Duration) time.Duration {
	return func(due time.Duration) time.Duration {
		f, e := time.Duration(from.Load()), time.Duration(to.Load())
		if f == 0 || due < f || due >= e {
			return 0
		}
		return e - now()
	}
}

// plannedOverrun runs one overrun-plan section (1.5 TTL, waiting on Done)
// in a synctest bubble on a memory engine, with the process's probe stalled
// over [validity end - before, validity end + after] and the lock's Done
// wrapped by wrap, and returns its grant.
func plannedOverrun(t *testing.T, before, after time.Duration, wrap func(api.Lock) api.Lock) history.Grant {
	t.Helper()
	var g history.Grant
	synctest.Test(t, func(t *testing.T) {
		const ttl = 100 * time.Millisecond
		e, err := engine.NewMemory(3, api.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rec := history.NewRecorder()
		var from, to atomic.Int64
		pr := startProbe(rec.Now, probePeriod, stalled(rec.Now, &from, &to))
		defer pr.stop()
		ctx := context.Background()
		l, err := e.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		until := rec.At(l.Until())
		to.Store(int64(until + after))
		from.Store(int64(until - before))
		g = sectionOn(t, rec, pr, wrap(l), plan{kind: "overrun", hold: ttl * 3 / 2})
		_ = l.Unlock(ctx)
		if g.Due <= g.ValidUntil || g.End < g.Due || g.Signaled {
			t.Fatalf("section %+v: want its timer due after the validity, the section ended by it, unsignalled", g)
		}
	})
	return g
}

// A section planned past its validity whose lost-lock signal comes late
// because its process was starved across the validity's end (the probe's
// wake-up due before it ran only after the section's own timer was due)
// is a starved overrun, listed with the probe's evidence, not a violation.
func TestStarvedPlannedOverrun(t *testing.T) {
	g := plannedOverrun(t, 10*time.Millisecond, 100*time.Millisecond, func(l api.Lock) api.Lock { return delayDone(l, 100*time.Millisecond) })
	if g.StallDue == 0 || g.StallDue > g.ValidUntil || g.StallRan < g.Due {
		t.Fatalf("section %+v: want the probe's stall recorded across [validity, own timer's due]", g)
	}
	h := history.History{Grants: []history.Grant{g}}
	if vs := history.Check(h); len(vs) != 0 {
		t.Fatalf("violations %v, want none: the process was starved across the validity's end", vs)
	}
	st := history.Starved(h)
	if len(st) != 1 || !strings.Contains(st[0].Detail, "probe timer") {
		t.Fatalf("starved %v, want the section, with the probe's evidence", st)
	}
}

// Negative controls: the probe must show the stall across the whole span
// from the validity's end to the section's own timer; a Done that never
// fires is an overrun whenever the probe ran in that span.
func TestPlannedOverrunNotStarved(t *testing.T) {
	never := func(l api.Lock) api.Lock { return neverDone{l} }
	for _, tc := range []struct {
		name          string
		before, after time.Duration
	}{
		{"probe on time", 0, 0},
		{"stall ended before the section's own timer", 10 * time.Millisecond, 20 * time.Millisecond},
		{"stall began after the validity", -5 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := plannedOverrun(t, tc.before, tc.after, never)
			if g.StallDue != 0 {
				t.Errorf("section %+v: a stall recorded", g)
			}
			h := history.History{Grants: []history.Grant{g}}
			if vs := history.Check(h); len(vs) != 1 || vs[0].Kind != history.Overrun {
				t.Fatalf("violations %v, want one overrun", vs)
			}
			if st := history.Starved(h); len(st) != 0 {
				t.Fatalf("starved %v: excused without a stall across the validity's end", st)
			}
		})
	}
}

// The probe's record: a wake-up due by until that ran no earlier than woke,
// or one due by until not run yet.
func TestProbeStall(t *testing.T) {
	p := &probe{now: func() time.Duration { return 500 }}
	if _, _, ok := p.stall(100, 200); ok {
		t.Fatal("empty probe: a stall")
	}
	p.ring[0], p.ring[1], p.ring[2] = probeWake{90, 95}, probeWake{97, 250}, probeWake{252, 254}
	p.n = 3
	if due, ran, ok := p.stall(100, 200); !ok || due != 97 || ran != 250 {
		t.Fatalf("stall(100, 200) = %v, %v, %v; want 97, 250", due, ran, ok)
	}
	for _, q := range [][2]time.Duration{{96, 200}, {100, 251}} {
		if due, ran, ok := p.stall(q[0], q[1]); ok {
			t.Errorf("stall%v = %v, %v: want none", q, due, ran)
		}
	}
	p.pending = 256
	if due, ran, ok := p.stall(300, 400); !ok || due != 256 || ran != 500 {
		t.Fatalf("pending: stall(300, 400) = %v, %v, %v; want 256, 500", due, ran, ok)
	}
	if _, _, ok := p.stall(255, 400); ok {
		t.Fatal("pending due after until: a stall")
	}
	if _, _, ok := (*probe)(nil).stall(1, 2); ok {
		t.Fatal("nil probe: a stall")
	}
}

// A worker's probe evidence reaches the history on its timebase, and only
// when the worker sent some.
func TestConvertStall(t *testing.T) {
	p := &pauser{clk: monoCal{base: 1_000}}
	line := workerLine{Ev: "grant", Key: "k", Holder: "w1/c1", GrantedAt: 1_010, ValidUntil: 1_100,
		Ran: true, Start: 1_020, End: 1_160, Due: 1_150, StallDue: 1_099, StallRan: 1_155}
	g, _ := p.convert(&workerProc{}, line)
	if g.StallDue != 99 || g.StallRan != 155 || g.Due != 150 || g.End != 160 {
		t.Fatalf("converted %+v: want stall 99-155, due 150, end 160 on the history's timebase", g)
	}
	line.StallDue, line.StallRan = 0, 0
	if g, _ := p.convert(&workerProc{}, line); g.StallDue != 0 || g.StallRan != 0 {
		t.Fatalf("converted %+v: a stall the worker did not send", g)
	}
}
