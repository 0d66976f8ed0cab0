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
// A lost-lock signal that is late while the process runs shows where the
// holder's timer is due after the validity (Due > ValidUntil: the sections
// planned to outlast it, which wait on the signal): those stay overruns.
// Without Due recorded nothing is excused.
func starved(g *Grant) bool {
	return g.Due > 0 && g.Due <= g.ValidUntil
}

// Starved lists the overruns Check does not report because the holder's
// process was starved (starved), with how late the holder's own timer was.
// Every section that ran past its validity unsignalled (and not paused on
// purpose) is in exactly one of Check's overruns and this list.
func Starved(h History) []Violation {
	var out []Violation
	for i := range h.Grants {
		g := &h.Grants[i]
		if !overran(g) || !starved(g) {
			continue
		}
		out = append(out, Violation{Kind: StarvedOverrun, Key: g.Key, A: g, Detail: fmt.Sprintf(
			"%s ran until %v, %v past its validity (%v), the lost-lock signal not fired; its own timer, due at %v, woke it %v late",
			g.Holder, ms(g.End), ms(g.End-g.ValidUntil), ms(g.ValidUntil), ms(g.Due), ms(g.End-g.Due))})
	}
	return out
}
