package torture

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/history"
)

// lateDone is a real lock whose lost-lock signal reaches the holder late by
// a set delay: a Done that fires late on a process that is not starved.
type lateDone struct {
	api.Lock
	ch chan struct{}
}

func delayDone(l api.Lock, by time.Duration) *lateDone {
	d := &lateDone{Lock: l, ch: make(chan struct{})}
	go func() {
		<-l.Done()
		time.Sleep(by)
		close(d.ch)
	}()
	return d
}

func (d *lateDone) Done() <-chan struct{} { return d.ch }

// sectionOn runs one critical section of plan p on l the way the torture's
// clients do and returns its grant as recorded.
func sectionOn(t *testing.T, rec *history.Recorder, pr *probe, l api.Lock, p plan) history.Grant {
	t.Helper()
	r := &run{rec: rec, probe: pr}
	g := history.Grant{Key: l.Key(), Holder: "h", GrantedAt: rec.Now(), ValidUntil: rec.At(l.Until())}
	r.section(l, p, &g)
	g.ValidUntil = rec.At(l.Until())
	if !g.Ran {
		t.Fatal("the section did not run")
	}
	return g
}

// The starvation excuse must not hide a lost-lock signal that comes late
// while the process runs: an overrun plan (it waits on Done past its
// validity) whose Done is delayed by a TTL, on a quiet process (a synctest
// bubble: timers fire exactly when due, and the process's starvation probe
// runs on time), is an overrun, not starved; with Done on time the same
// section is clean.
func TestLateDoneIsOverrunNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 100 * time.Millisecond
		e, err := engine.NewMemory(3, api.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		rec := history.NewRecorder()
		pr := startProbe(rec.Now, probePeriod, nil)
		defer pr.stop()
		ctx := context.Background()
		overrun := plan{kind: "overrun", hold: ttl * 3 / 2}

		l, err := e.TryLock(ctx, "late")
		if err != nil {
			t.Fatal(err)
		}
		late := sectionOn(t, rec, pr, delayDone(l, ttl), overrun)
		_ = l.Unlock(ctx)
		if late.Due <= late.ValidUntil || late.End < late.Due {
			t.Fatalf("section %+v: want its timer due after the validity and the section ended by it", late)
		}
		if late.StallDue != 0 {
			t.Fatalf("section %+v: the probe ran on time, yet a stall was recorded", late)
		}

		l, err = e.TryLock(ctx, "on-time")
		if err != nil {
			t.Fatal(err)
		}
		onTime := sectionOn(t, rec, pr, l, overrun)
		_ = l.Unlock(ctx)

		h := history.History{Grants: []history.Grant{late, onTime}}
		vs := history.Check(h)
		if len(vs) != 1 || vs[0].Kind != history.Overrun || vs[0].A.Key != "late" {
			t.Fatalf("violations %v, want one overrun, of the section whose Done came late", vs)
		}
		if st := history.Starved(h); len(st) != 0 {
			t.Fatalf("starved %v: a late Done on a quiet process was excused", st)
		}
		if !onTime.Signaled || onTime.End != onTime.ValidUntil {
			t.Errorf("on time: %+v, want the section stopped by Done at its validity", onTime)
		}
	})
}

// work reports when its timer was due, never before the timer's deadline:
// the checker takes End-Due as how late the holder woke.
func TestWorkDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := history.NewRecorder()
		start := rec.Now()
		due := work(nil, 30*time.Millisecond, rec.Now)
		if end := rec.Now(); due != start+30*time.Millisecond || end != due {
			t.Fatalf("due %v, end %v from the start, want both 30ms", due-start, end-start)
		}
		if due := work(nil, 0, rec.Now); due != rec.Now() {
			t.Fatalf("no timer: due %v, want now %v", due, rec.Now())
		}
	})
}
