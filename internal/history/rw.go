package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// WriterOverlap: on a key with read locks, a writer overlapped another
// holder (SAFETY.md, "Read-write lock: why a writer overlaps no holder").
const WriterOverlap Kind = "writer-overlap"

// checkShared checks a key that has read locks: a writer (a grant that is
// not Shared) overlaps no holder, in clipped sections and, where those do
// not already overlap, in grant windows; readers may overlap each other.
// Fencing tokens do not apply to read-write locks; overrun applies to
// every grant.
func checkShared(key string, gs []*Grant) []Violation {
	var out []Violation
	seen := make(map[pair]bool)
	secs := ranSections(gs)
	sweepRW(secs, (*Grant).section, func(a, b *Grant) {
		seen[pair{a, b}], seen[pair{b, a}] = true, true
		as, ae := a.section()
		bs, be := b.section()
		out = append(out, Violation{Kind: WriterOverlap, Key: key, A: a, B: b, Detail: fmt.Sprintf(
			"%s %s ran [%v, %v] and %s %s ran [%v, %v] (clipped to validity): %v of overlap",
			role(a), a.Holder, ms(as), ms(ae), role(b), b.Holder, ms(bs), ms(be), ms(min(ae, be)-max(as, bs)))})
	})
	wins := openWindows(gs)
	sweepRW(wins, (*Grant).window, func(a, b *Grant) {
		if seen[pair{a, b}] {
			return
		}
		as, ae := a.window()
		bs, be := b.window()
		out = append(out, Violation{Kind: WriterOverlap, Key: key, A: a, B: b, Detail: fmt.Sprintf(
			"%s %s held it over [%v, %v] and %s %s over [%v, %v]: %v of overlap",
			role(a), a.Holder, ms(as), ms(ae), role(b), b.Holder, ms(bs), ms(be), ms(min(ae, be)-max(as, bs)))})
	})
	return append(out, overruns(key, gs)...)
}

func role(g *Grant) string {
	if g.Shared {
		return "reader"
	}
	return "writer"
}

// sweepRW calls found(a, b) for every interval b that overlaps an earlier
// one a where a or b is a writer: in start order, a writer must start after
// every earlier interval ended, and a reader after every earlier writer
// ended. Each offending interval is reported once, paired with the earlier
// one that reaches furthest (any holder for a writer, a writer for a
// reader), which finds every key with an overlapping pair in O(n log n).
func sweepRW(gs []*Grant, span func(*Grant) (time.Duration, time.Duration), found func(a, b *Grant)) {
	slices.SortStableFunc(gs, func(a, b *Grant) int {
		as, _ := span(a)
		bs, _ := span(b)
		return cmp.Compare(as, bs)
	})
	var reach, wreach *Grant // the earlier interval, and writer, that end last
	var reachEnd, wreachEnd time.Duration
	for _, g := range gs {
		s, e := span(g)
		switch {
		case !g.Shared && reach != nil && s < reachEnd:
			found(reach, g)
		case g.Shared && wreach != nil && s < wreachEnd:
			found(wreach, g)
		}
		if reach == nil || e > reachEnd {
			reach, reachEnd = g, e
		}
		if !g.Shared && (wreach == nil || e > wreachEnd) {
			wreach, wreachEnd = g, e
		}
	}
}
