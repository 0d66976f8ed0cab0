package history

import "fmt"

// StarvedOverrun names an overrun explained by the holder's process being
// starved of CPU (see Starved). It is not a violation: Check never returns
// it.
const StarvedOverrun Kind = "starved-overrun"

// overran reports whether g's section ended after its validity while the
// lost-lock signal had not fired, its process not stopped on purpose.
func overran(g *Grant) bool {
	return g.Ran && g.End > g.ValidUntil && !g.Signaled && !g.Paused
}

// starved reports whether g's overrun is explained by its process being
// starved: the section's own timer was due (Due) no later than its
// validity ended, yet the holder ran again only after it. Its timer fired
// late by End-Due, at least the overrun End-ValidUntil, so the process did
// not run the holder over the whole overrun, and the engine's timer, due at
// ValidUntil, woke in that same late wake-up: the Go runtime starts a
// timer's goroutine when it is due and the holder, woken by its own timer
// at once, may run before it. A starved process is a paused one; what it
// does next only fencing can stop (the write rules judge that).
//
// A section planned past its validity (Due > ValidUntil: it waits on the
// signal) cannot show this from its own timer; for it the evidence is the
// process's starvation probe (probed). Without either nothing is excused.
func starved(g *Grant) bool {
	return (g.Due > 0 && g.Due <= g.ValidUntil) || probed(g)
}

// probed reports whether the process's starvation probe shows the stall
// across the validity's end: the probe's timer, due by ValidUntil, ran
// only once the section's own timer was due (or its end, without one).
// The probe was not run from ValidUntil until then, so neither could the
// engine's timer, due at ValidUntil, have run: it, the probe and the
// holder's own timer fell due in one late wake-up, whose goroutines run in
// no set order (the holder may look before the engine's callback runs;
// requiring the probe to run after the holder's look would excuse only the
// wake-ups where the probe happened to run last). A lost-lock signal that
// is late while the probe runs on time stays an overrun.
func probed(g *Grant) bool {
	woke := g.End
	if g.Due > 0 {
		woke = min(woke, g.Due)
	}
	return g.StallDue > 0 && g.StallDue <= g.ValidUntil && g.StallRan >= woke
}

// Starved lists the overruns Check does not report because the holder's
// process was starved (starved), with the evidence: how late the holder's
// own timer, or the process's probe, was.
// Every section that ran past its validity unsignalled (and not paused on
// purpose) is in exactly one of Check's overruns and this list.
func Starved(h History) []Violation {
	var out []Violation
	for i := range h.Grants {
		g := &h.Grants[i]
		if !overran(g) || !starved(g) {
			continue
		}
		d := fmt.Sprintf("%s ran until %v, %v past its validity (%v), the lost-lock signal not fired; ",
			g.Holder, ms(g.End), ms(g.End-g.ValidUntil), ms(g.ValidUntil))
		if g.Due > 0 && g.Due <= g.ValidUntil {
			d += fmt.Sprintf("its own timer, due at %v, woke it %v late", ms(g.Due), ms(g.End-g.Due))
		} else {
			d += fmt.Sprintf("its own timer due at %v; the process's probe timer, due at %v, ran at %v or later, %v late",
				ms(g.Due), ms(g.StallDue), ms(g.StallRan), ms(g.StallRan-g.StallDue))
		}
		out = append(out, Violation{Kind: StarvedOverrun, Key: g.Key, A: g, Detail: d})
	}
	return out
}
