package torture

import (
	"cmp"
	"slices"

	"github.com/quorumlock/redlock/internal/history"
)

// starved lists the overruns history.Starved explains by a starved
// process, earliest first, the first MaxListed of them.
func (r *run) starved(h history.History) Violations {
	vs := history.Starved(h)
	out := Violations{Count: len(vs), ByKind: map[string]int{}, List: []history.Violation{}}
	if len(vs) == 0 {
		return out
	}
	out.ByKind[string(history.StarvedOverrun)] = len(vs)
	slices.SortStableFunc(vs, func(a, b history.Violation) int { return cmp.Compare(a.A.End, b.A.End) })
	out.List = vs[:min(len(vs), r.cfg.MaxListed)]
	return out
}
