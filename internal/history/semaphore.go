package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TooManyHolders: more grants of one semaphore's permits were vouched for at
// once than the semaphore has permits.
const TooManyHolders Kind = "semaphore"

// checkSemaphores applies the rule "never more than P holders": at no
// instant may more grants of one semaphore (Grant.Semaphore) have open
// windows ([GrantedAt, min(ValidUntil, ReleasedAt)], as for grant-overlap)
// than its Permits. A window ends where the next begins, so a permit
// handed from one holder to the next in the same instant counts once. Each
// time the count rises above P it is reported once, with the holders then
// inside, until it falls back to P. Grants that disagree on Permits are
// judged by the smallest: callers must agree on it, and the engine cannot
// hold a semaphore to more permits than its callers ask for.
func checkSemaphores(grants []Grant) []Violation {
	bySem := make(map[string][]*Grant)
	for i := range grants {
		g := &grants[i]
		if g.Semaphore == "" || g.Permits < 1 {
			continue
		}
		if s, e := g.window(); s < e {
			bySem[g.Semaphore] = append(bySem[g.Semaphore], g)
		}
	}
	names := make([]string, 0, len(bySem))
	for n := range bySem {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Violation
	for _, n := range names {
		out = append(out, checkSemaphore(n, bySem[n])...)
	}
	return out
}

type semEvent struct {
	at    time.Duration
	start bool
	g     *Grant
}

func checkSemaphore(name string, gs []*Grant) []Violation {
	p := gs[0].Permits
	evs := make([]semEvent, 0, 2*len(gs))
	for _, g := range gs {
		p = min(p, g.Permits)
		s, e := g.window()
		evs = append(evs, semEvent{s, true, g}, semEvent{e, false, g})
	}
	// Ends before starts at one instant: windows are half-open.
	slices.SortStableFunc(evs, func(a, b semEvent) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.start == b.start:
			return 0
		case a.start:
			return 1
		}
		return -1
	})
	var out []Violation
	inside := make(map[*Grant]struct{})
	over := false
	for _, ev := range evs {
		if !ev.start {
			delete(inside, ev.g)
			if len(inside) <= p {
				over = false
			}
			continue
		}
		inside[ev.g] = struct{}{}
		if len(inside) <= p || over {
			continue
		}
		over = true
		holders := make([]*Grant, 0, len(inside))
		for g := range inside {
			holders = append(holders, g)
		}
		slices.SortFunc(holders, func(a, b *Grant) int {
			return cmp.Or(cmp.Compare(a.GrantedAt, b.GrantedAt), cmp.Compare(a.Holder, b.Holder))
		})
		desc := make([]string, len(holders))
		for i, g := range holders {
			s, e := g.window()
			desc[i] = fmt.Sprintf("%s on %q over [%v, %v]", g.Holder, g.Key, ms(s), ms(e))
		}
		out = append(out, Violation{Kind: TooManyHolders, Key: name, A: holders[0], B: ev.g, Detail: fmt.Sprintf(
			"%d holders of %d permits at %v: %s", len(holders), p, ms(ev.at), strings.Join(desc, ", "))})
	}
	return out
}
