package history

import (
	"slices"
	"testing"
	"time"
)

// due sets the moment g's own timer was due.
func due(gr Grant, at time.Duration) Grant {
	gr.Due = at * ms1
	return gr
}

// stall sets the process's probe wake-up pending at g's validity's end.
func stall(gr Grant, due, ran time.Duration) Grant {
	gr.StallDue, gr.StallRan = due*ms1, ran*ms1
	return gr
}

// An overrun is excused as starvation only when the holder's own timer was
// due within the validity (so it woke the holder late by at least the
// overrun); every other overrun stays a violation, and every unsignalled
// overrun is in exactly one of Check's list and Starved's.
func TestStarvedOverruns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       History
		want    []Kind // from Check
		starved int
		detail  string // of the first starved one
	}{
		{name: "timer due within validity, woke late: starved", h: History{Grants: []Grant{
			due(g("k", "a", 1, 0, 100, 0, 1, 130), 90),
		}}, starved: 1, detail: "a ran until 130.000ms, 30.000ms past its validity (100.000ms), the lost-lock signal not fired; its own timer, due at 90.000ms, woke it 40.000ms late"},
		{name: "timer due at the validity's end: starved", h: History{Grants: []Grant{
			due(g("k", "a", 1, 0, 100, 0, 1, 130), 100),
		}}, starved: 1},
		// The section was planned to outlast its validity and waited on
		// the signal: a late signal on a process that ran is an overrun.
		{name: "timer due after the validity: overrun", h: History{Grants: []Grant{
			due(g("k", "a", 1, 0, 100, 0, 1, 150), 150),
		}}, want: []Kind{Overrun}},
		{name: "timer due after the validity, woke late too: overrun", h: History{Grants: []Grant{
			due(g("k", "a", 1, 0, 100, 0, 1, 180), 101),
		}}, want: []Kind{Overrun}},
		// Planned past the validity: the process's probe must show the
		// stall from the validity's end until the section's own timer.
		{name: "timer due after the validity, probe stalled across it: starved", h: History{Grants: []Grant{
			stall(due(g("k", "a", 1, 0, 100, 0, 1, 160), 150), 99, 151),
		}}, starved: 1, detail: "a ran until 160.000ms, 60.000ms past its validity (100.000ms), the lost-lock signal not fired; its own timer due at 150.000ms; the process's probe timer, due at 99.000ms, ran at 151.000ms or later, 52.000ms late"},
		{name: "probe ran before the section's own timer was due: overrun", h: History{Grants: []Grant{
			stall(due(g("k", "a", 1, 0, 100, 0, 1, 160), 150), 99, 149),
		}}, want: []Kind{Overrun}},
		{name: "probe due after the validity: overrun", h: History{Grants: []Grant{
			stall(due(g("k", "a", 1, 0, 100, 0, 1, 160), 150), 101, 170),
		}}, want: []Kind{Overrun}},
		{name: "no timer, probe stalled until the end: starved", h: History{Grants: []Grant{
			stall(g("k", "a", 1, 0, 100, 0, 1, 130), 98, 130),
		}}, starved: 1},
		{name: "no timer, probe ran before the end: overrun", h: History{Grants: []Grant{
			stall(g("k", "a", 1, 0, 100, 0, 1, 130), 98, 129),
		}}, want: []Kind{Overrun}},
		{name: "no timer recorded: overrun", h: History{Grants: []Grant{
			g("k", "a", 1, 0, 100, 0, 1, 130),
		}}, want: []Kind{Overrun}},
		{name: "signaled: neither", h: History{Grants: []Grant{
			signaled(due(g("k", "a", 1, 0, 100, 0, 1, 130), 90)),
		}}},
		{name: "ended within validity: neither", h: History{Grants: []Grant{
			due(g("k", "a", 1, 0, 100, 0, 1, 99), 90),
		}}},
		// Starvation excuses the overrun only: two holders at once are an
		// overlap whatever the timers did.
		{name: "starved holder overlapping another: overlap", h: History{Grants: []Grant{
			due(g("k", "a", 1, 0, 100, 0, 1, 130), 90),
			due(g("k", "b", 2, 50, 150, 0, 60, 70), 70),
		}}, want: []Kind{Overlap}, starved: 1},
		{name: "starved reader beside a writer: writer-overlap", h: History{Grants: []Grant{
			reader(due(g("k", "r", 0, 0, 100, 0, 1, 130), 90)),
			due(g("k", "w", 0, 50, 150, 0, 60, 70), 70),
		}}, want: []Kind{WriterOverlap}, starved: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkKinds(t, tc.h, tc.want, "")
			st := Starved(tc.h)
			if len(st) != tc.starved {
				t.Fatalf("Starved: %d, want %d: %v", len(st), tc.starved, st)
			}
			for _, v := range st {
				if v.Kind != StarvedOverrun || v.A == nil || v.Key == "" {
					t.Errorf("incomplete starved overrun %+v", v)
				}
			}
			if tc.detail != "" && st[0].Detail != tc.detail {
				t.Errorf("detail\n got %q\nwant %q", st[0].Detail, tc.detail)
			}
			// Exactly one list holds each unsignalled overrun.
			var over int
			for _, v := range Check(tc.h) {
				if v.Kind == Overrun {
					over++
				}
			}
			var all int
			for i := range tc.h.Grants {
				if overran(&tc.h.Grants[i]) {
					all++
				}
			}
			if over+len(st) != all {
				t.Errorf("%d overruns + %d starved, want %d unsignalled sections past validity", over, len(st), all)
			}
			if slices.ContainsFunc(Check(tc.h), func(v Violation) bool { return v.Kind == StarvedOverrun }) {
				t.Error("Check returned a starved overrun as a violation")
			}
		})
	}
}
