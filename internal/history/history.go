// Package history records what lock holders did and checks it for safety
// violations: the evidence behind `redlock torture`.
//
// # What is recorded
//
// A Grant is one successful Lock: the key, the holder, the fencing token,
// when the holder got the lock back (GrantedAt), the validity deadline the
// engine gave it (ValidUntil, Lock.Until, moved by extensions), when the
// holder began to Unlock (ReleasedAt), and the critical section it actually
// ran: Start, End, and whether the lost-lock signal (Lock.Done) had fired
// when the holder looked at End.
//
// # Timebase
//
// Every time is an offset from one Recorder's base, read from Go's
// monotonic clock (time.Since(base), Lock.Until().Sub(base)). Holders in
// the recording process share that clock; holders in other processes of
// the same machine report CLOCK_MONOTONIC (the clock behind Go's monotonic
// reading on Linux, shared by every process), which the recorder's owner
// converts to the same offsets. So times of different holders and engines
// compare directly; wall-clock steps do not affect them.
// Recording is conservative: GrantedAt is read after Lock returned (later
// than the real grant), ReleasedAt before Unlock is called (earlier than the
// release takes effect), so a delay in recording can hide an overlap but
// never invent one.
//
// # Rules (see Check)
//
//   - overlap: two holders of one key ran critical sections that overlap,
//     each clipped to its own validity ([Start, min(End, ValidUntil)]): both
//     acted at once while the engine vouched for both.
//   - grant-overlap: two grants of one key whose windows [GrantedAt,
//     min(ValidUntil, ReleasedAt)] overlap (SAFETY.md, "The checker"), when their sections
//     did not already overlap.
//   - token-order: fenced grants of one key, in GrantedAt order, whose
//     tokens do not strictly increase, unless a Reset (a moment when the
//     fencing precondition, a majority of masters keeping their counters,
//     was knowingly broken) lies between them.
//   - overrun: a critical section that ended after its validity (End >
//     ValidUntil) while the lost-lock signal had not fired by End, unless
//     the holder's process was stopped on purpose during it (Paused) or
//     the section's own timer, due within the validity, woke it late by at
//     least the overrun, or, for a section planned past its validity, the
//     process's starvation probe was not run from the validity's end until
//     the section's own timer was due (starved: see Starved, which lists
//     those apart).
//   - writer-overlap: on a key with read locks (Grant.Shared), a writer's
//     section or window overlaps another holder's, reader or writer; two
//     readers may overlap (rw.go). Replaces overlap and grant-overlap there.
//   - semaphore: more holders of one semaphore's permits than it has
//     permits, at one instant of their grant windows (see checkSemaphores).
//   - stale-write and late-write: writes to a protected resource (see
//     Write and checkWrites).
package history

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Grant is one held lock and what its holder did with it. Times are
// offsets on the Recorder's timebase.
type Grant struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// Token is the fencing token, 0 without fencing.
	Token      int64         `json:"token,omitempty"`
	GrantedAt  time.Duration `json:"granted_at"`
	ValidUntil time.Duration `json:"valid_until"`
	// Released: the holder called Unlock at ReleasedAt.
	Released   bool          `json:"released"`
	ReleasedAt time.Duration `json:"released_at,omitempty"`
	// Ran: the holder ran a critical section from Start to End. Signaled:
	// the lost-lock signal had fired when the holder checked it at End.
	Ran      bool          `json:"ran"`
	Start    time.Duration `json:"start,omitempty"`
	End      time.Duration `json:"end,omitempty"`
	Signaled bool          `json:"signaled,omitempty"`
	// Due: when the section's own timer (its planned length) was due, read
	// after it was set; for a section with no timer, when it began. 0: not
	// recorded. The evidence starved weighs (starved.go).
	Due time.Duration `json:"due,omitempty"`
	// Stall is the holder's process's starvation probe (a timer of its
	// own, rearmed every few milliseconds) as seen at the section's end:
	// the probe's wake-up that was pending when the validity ended, due
	// at StallDue, ran at StallRan (or had not run by the time the
	// holder looked: StallRan is then that moment, a lower bound).
	// Recorded only for a section that ended past its validity
	// unsignalled, and only when such a wake-up was due by ValidUntil and
	// ran after the section's own timer was due; 0: none. The evidence
	// starved weighs for sections planned past their validity (starved.go).
	StallDue time.Duration `json:"stall_due,omitempty"`
	StallRan time.Duration `json:"stall_ran,omitempty"`
	// Paused: the fault schedule stopped the holder's process (SIGSTOP)
	// during the section. A stopped process cannot act on the lost-lock
	// signal, so overrun does not judge it; what it does after it resumes
	// is judged by the write rules.
	Paused bool `json:"paused,omitempty"`
	// Shared: a read lock (RLock); readers of a key may overlap each
	// other, never a writer (rw.go).
	Shared bool `json:"shared,omitempty"`
	// Semaphore names the semaphore whose permit this grant is (Key is
	// then the permit's slot, or any key unique to the holder), and
	// Permits its number of permits; see checkSemaphores.
	Semaphore string `json:"semaphore,omitempty"`
	Permits   int    `json:"permits,omitempty"`
}

// window is the span the engine vouched for this holder.
func (g *Grant) window() (time.Duration, time.Duration) {
	end := g.ValidUntil
	if g.Released && g.ReleasedAt < end {
		end = g.ReleasedAt
	}
	return g.GrantedAt, end
}

// section is the critical section clipped to the validity.
func (g *Grant) section() (time.Duration, time.Duration) {
	return g.Start, min(g.End, g.ValidUntil)
}

// usable reports whether the holder had the lock back before its validity
// ran out.
func (g *Grant) usable() bool { return g.GrantedAt < g.ValidUntil }

// Reset marks a span during which the fencing precondition was broken on
// purpose (a fault schedule killed masters so that fewer than a majority
// kept their counters); tokens are not compared across it.
type Reset struct {
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
	Why  string        `json:"why"`
}

// History is everything recorded.
type History struct {
	Grants []Grant
	Resets []Reset
	// Writes are the writes holders sent to a protected resource, accepted
	// or refused.
	Writes []Write
}

// Kind names a violated rule.
type Kind string

// The rules.
const (
	Overlap      Kind = "overlap"
	GrantOverlap Kind = "grant-overlap"
	TokenOrder   Kind = "token-order"
	Overrun      Kind = "overrun"
)

// Violation is one broken rule. A is the earlier grant, B the later (nil
// for a rule about one grant).
type Violation struct {
	Kind   Kind   `json:"kind"`
	Key    string `json:"key"`
	Detail string `json:"detail"`
	A      *Grant `json:"a"`
	B      *Grant `json:"b,omitempty"`
	// Writes are the writes a write rule judged, in the resource's order
	// (the earlier accepted one first).
	Writes []Write `json:"writes,omitempty"`
}

func (v Violation) String() string { return fmt.Sprintf("%s %q: %s", v.Kind, v.Key, v.Detail) }

// Check applies every rule to h and returns the violations, by key, then
// time.
func Check(h History) []Violation {
	byKey := make(map[string][]*Grant)
	for i := range h.Grants {
		g := &h.Grants[i]
		byKey[g.Key] = append(byKey[g.Key], g)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	resets := slices.Clone(h.Resets)
	slices.SortFunc(resets, func(a, b Reset) int { return cmp.Compare(a.From, b.From) })
	var out []Violation
	for _, k := range keys {
		gs := byKey[k]
		if slices.ContainsFunc(gs, func(g *Grant) bool { return g.Shared }) {
			out = append(out, checkShared(k, gs)...)
			continue
		}
		out = append(out, checkKey(k, gs, resets)...)
	}
	out = append(out, checkSemaphores(h.Grants)...)
	out = append(out, checkWrites(h.Writes, resets)...)
	return out
}

type pair struct{ a, b *Grant }

func checkKey(key string, gs []*Grant, resets []Reset) []Violation {
	var out []Violation
	// overlap: clipped critical sections.
	seen := make(map[pair]bool)
	secs := ranSections(gs)
	sweep(secs, (*Grant).section, func(a, b *Grant) {
		seen[pair{a, b}], seen[pair{b, a}] = true, true
		as, ae := a.section()
		bs, be := b.section()
		out = append(out, Violation{Kind: Overlap, Key: key, A: a, B: b, Detail: fmt.Sprintf(
			"%s ran [%v, %v] and %s ran [%v, %v] (clipped to validity): %v of overlap",
			a.Holder, ms(as), ms(ae), b.Holder, ms(bs), ms(be), ms(min(ae, be)-max(as, bs)))})
	})
	// grant-overlap: grant windows.
	wins := openWindows(gs)
	sweep(wins, (*Grant).window, func(a, b *Grant) {
		if seen[pair{a, b}] {
			return
		}
		as, ae := a.window()
		bs, be := b.window()
		out = append(out, Violation{Kind: GrantOverlap, Key: key, A: a, B: b, Detail: fmt.Sprintf(
			"%s held it over [%v, %v] and %s over [%v, %v]: %v of overlap",
			a.Holder, ms(as), ms(ae), b.Holder, ms(bs), ms(be), ms(min(ae, be)-max(as, bs)))})
	})
	// token-order.
	var fenced []*Grant
	for _, g := range gs {
		if g.Token != 0 && g.usable() {
			fenced = append(fenced, g)
		}
	}
	// Grants recorded at one instant (a fake clock's, or a coarse one's)
	// have no order of their own: taken in token order they accuse nobody,
	// while equal tokens still do.
	slices.SortStableFunc(fenced, func(a, b *Grant) int {
		return cmp.Or(cmp.Compare(a.GrantedAt, b.GrantedAt), cmp.Compare(a.Token, b.Token))
	})
	for i := 1; i < len(fenced); i++ {
		a, b := fenced[i-1], fenced[i]
		if b.Token > a.Token || resetBetween(resets, a.GrantedAt, b.GrantedAt) {
			continue
		}
		out = append(out, Violation{Kind: TokenOrder, Key: key, A: a, B: b, Detail: fmt.Sprintf(
			"%s got token %d at %v, after %s got token %d at %v: tokens must strictly increase",
			b.Holder, b.Token, ms(b.GrantedAt), a.Holder, a.Token, ms(a.GrantedAt))})
	}
	return append(out, overruns(key, gs)...)
}

// overruns applies the overrun rule to every grant of key.
func overruns(key string, gs []*Grant) []Violation {
	var out []Violation
	for _, g := range gs {
		if overran(g) && !starved(g) {
			out = append(out, Violation{Kind: Overrun, Key: key, A: g, Detail: fmt.Sprintf(
				"%s ran until %v, %v past its validity (%v), and the lost-lock signal had not fired",
				g.Holder, ms(g.End), ms(g.End-g.ValidUntil), ms(g.ValidUntil))})
		}
	}
	return out
}

// sweep calls found(a, b) for every interval b that starts before the
// furthest end among the intervals that started before it (a is the one
// with that end), so each interval overlapping an earlier one is reported
// once, paired with the earlier interval that reaches furthest.
func sweep(gs []*Grant, span func(*Grant) (time.Duration, time.Duration), found func(a, b *Grant)) {
	slices.SortStableFunc(gs, func(a, b *Grant) int {
		as, _ := span(a)
		bs, _ := span(b)
		return cmp.Compare(as, bs)
	})
	var reach *Grant
	var reachEnd time.Duration
	for _, g := range gs {
		s, e := span(g)
		if reach != nil && s < reachEnd {
			found(reach, g)
		}
		if reach == nil || e > reachEnd {
			reach, reachEnd = g, e
		}
	}
}

func resetBetween(resets []Reset, from, to time.Duration) bool {
	for _, r := range resets {
		if r.From <= to && r.To >= from {
			return true
		}
	}
	return false
}

// ms formats an offset in milliseconds, to the microsecond.
func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }

// Recorder collects grants from many holders at once. Each holder appends
// to a Log of its own, without locking; History merges them once the
// holders are done.
type Recorder struct {
	base time.Time

	mu     sync.Mutex
	logs   []*Log
	resets []Reset

	grants atomic.Int64
	maxTok sync.Map // key -> *atomic.Int64
}

// NewRecorder starts a recorder whose timebase begins now.
func NewRecorder() *Recorder { return &Recorder{base: time.Now()} }

// Now is the current offset on the timebase.
func (r *Recorder) Now() time.Duration { return time.Since(r.base) }

// At converts a time read from the monotonic clock (time.Now, Lock.Until)
// to an offset on the timebase.
func (r *Recorder) At(t time.Time) time.Duration { return t.Sub(r.base) }

// Base is the timebase's origin.
func (r *Recorder) Base() time.Time { return r.base }

// Log returns a new log for one holder. A Log is not safe for concurrent
// use: give each goroutine its own.
func (r *Recorder) Log() *Log {
	l := &Log{r: r}
	r.mu.Lock()
	r.logs = append(r.logs, l)
	r.mu.Unlock()
	return l
}

// Reset records a span during which tokens are not compared.
func (r *Recorder) Reset(rs Reset) {
	r.mu.Lock()
	r.resets = append(r.resets, rs)
	r.mu.Unlock()
}

// Grants is the number of grants added so far.
func (r *Recorder) Grants() int64 { return r.grants.Load() }

// MaxToken is the largest token recorded for key so far.
func (r *Recorder) MaxToken(key string) int64 {
	if v, ok := r.maxTok.Load(key); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// NoteToken records that key was granted with token, for MaxToken, as soon
// as the holder has it (Add notes it too).
func (r *Recorder) NoteToken(key string, token int64) {
	if token <= 0 {
		return
	}
	v, _ := r.maxTok.LoadOrStore(key, new(atomic.Int64))
	m := v.(*atomic.Int64)
	for {
		cur := m.Load()
		if token <= cur || m.CompareAndSwap(cur, token) {
			return
		}
	}
}

// History merges every log. Call it once the holders have stopped adding.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.logs {
		n += len(l.grants)
	}
	h := History{Grants: make([]Grant, 0, n), Resets: slices.Clone(r.resets)}
	for _, l := range r.logs {
		h.Grants = append(h.Grants, l.grants...)
		h.Writes = append(h.Writes, l.writes...)
	}
	return h
}

// Log is one holder's record.
type Log struct {
	r      *Recorder
	grants []Grant
	writes []Write
}

// Add records a finished grant.
func (l *Log) Add(g Grant) {
	l.grants = append(l.grants, g)
	l.r.grants.Add(1)
	l.r.NoteToken(g.Key, g.Token)
}

// ranSections lists the grants of gs whose holder ran a critical section
// that is not empty once clipped to its validity.
func ranSections(gs []*Grant) []*Grant {
	var out []*Grant
	for _, g := range gs {
		if s, e := g.section(); g.Ran && s < e {
			out = append(out, g)
		}
	}
	return out
}

// openWindows lists the grants of gs whose grant window is not empty.
func openWindows(gs []*Grant) []*Grant {
	var out []*Grant
	for _, g := range gs {
		if s, e := g.window(); s < e {
			out = append(out, g)
		}
	}
	return out
}
