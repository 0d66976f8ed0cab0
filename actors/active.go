package actors

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/api"
)

// activeCalls is a coordinator's set of unfinished calls: a slice in which
// each call knows its place (Call.slot), so that adding and removing cost a
// store or two. It was a map[*Call]struct{}, whose insert and delete, once
// per call, were 2-3 % of the CPU of a lock cycle at 256 lockers on the
// memory masters; the set is only ever walked when the coordinator closes.
type activeCalls []*Call

func (a *activeCalls) add(call *Call) {
	if call.slot != 0 {
		return // already in (the map this replaced ignored a second add too)
	}
	*a = append(*a, call)
	call.slot = int32(len(*a))
}

// remove takes call out if it is in; order is not kept.
func (a *activeCalls) remove(call *Call) {
	s := *a
	i := int(call.slot) - 1
	if i < 0 || i >= len(s) || s[i] != call {
		return
	}
	last := s[len(s)-1]
	s[i], last.slot = last, int32(i+1)
	s[len(s)-1] = nil
	*a = s[:len(s)-1]
	call.slot = 0
}

// abandonActive finishes every active call with ErrClosed. It walks a copy:
// abandoning a call finishes it (and may finish others, an AcquireAny's
// children), which changes the set; a call finished meanwhile is skipped,
// as a map's range skipped a deleted entry.
func (c *coordinator) abandonActive(ctx actor.Context) {
	for _, call := range slices.Clone(c.active) {
		if call.slot != 0 {
			c.abandon(ctx, call, api.ErrClosed)
		}
	}
}
