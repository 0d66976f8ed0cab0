package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Write is one write a holder sent to a protected resource: a store that
// orders the writes of each key it accepts (Seq) and, with fencing, refuses
// a token below the largest it has accepted for the key.
type Write struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// Token is the writer's fencing token, 0 without fencing.
	Token int64 `json:"token,omitempty"`
	// GrantedAt and ValidUntil are the writer's grant, as in Grant.
	GrantedAt  time.Duration `json:"granted_at"`
	ValidUntil time.Duration `json:"valid_until"`
	// SentAt is read before the write was sent, AckedAt after the
	// resource's answer arrived: it took effect in between.
	SentAt  time.Duration `json:"sent_at"`
	AckedAt time.Duration `json:"acked_at"`
	// Accepted: the resource stored the write, as the Seq-th accepted write
	// of Key. Refused writes have Seq 0.
	Accepted bool  `json:"accepted"`
	Seq      int64 `json:"seq,omitempty"`
	// Seen is the largest token the resource had accepted for Key when it
	// judged this write (its own account, for the report; the rules derive
	// it from the accepted writes instead).
	Seen int64 `json:"seen,omitempty"`
}

// The write rules.
const (
	// StaleWrite: a fenced write accepted after the resource had accepted a
	// larger token for the key. With fencing on the resource must refuse
	// it; this rule checks that it did (the resource is part of the
	// evidence too).
	StaleWrite Kind = "stale-write"
	// LateWrite: a write accepted after the resource had accepted a write
	// whose holder was granted the key only after this writer's validity
	// had ended: an earlier holder's write landed on top of a later
	// holder's, the lost update that fencing exists to prevent. It needs no
	// tokens, so it judges runs without fencing too (the negative control
	// of the client-pause fault).
	LateWrite Kind = "late-write"
)

// grant is the writer's grant, as far as the write knows it: what a
// Violation shows as A or B.
func (w *Write) grant() *Grant {
	return &Grant{Key: w.Key, Holder: w.Holder, Token: w.Token, GrantedAt: w.GrantedAt, ValidUntil: w.ValidUntil}
}

// checkWrites applies the write rules to the accepted writes of each key, in
// the resource's order.
//
// Why late-write cannot invent a violation: b.GrantedAt is read after b's
// Lock returned, so b's real grant came no later. If it came at or after
// w's ValidUntil, w's write was applied after b's write, hence after b's
// grant, hence after w's validity: a late write. If it came before w's
// ValidUntil, w's holder had not let go yet (a holder writes before it
// unlocks, and w landed after b's write), so the engine vouched for two
// holders at once: a real violation either way.
func checkWrites(ws []Write, resets []Reset) []Violation {
	byKey := make(map[string][]*Write)
	for i := range ws {
		w := &ws[i]
		if w.Accepted {
			byKey[w.Key] = append(byKey[w.Key], w)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []Violation
	for _, k := range keys {
		acc := byKey[k]
		slices.SortStableFunc(acc, func(a, b *Write) int { return cmp.Compare(a.Seq, b.Seq) })
		var maxTok, latest *Write // among the writes accepted so far
		for _, w := range acc {
			if maxTok != nil && w.Token > 0 && w.Token < maxTok.Token {
				out = append(out, Violation{Kind: StaleWrite, Key: k, A: maxTok.grant(), B: w.grant(),
					Writes: []Write{*maxTok, *w}, Detail: fmt.Sprintf(
						"%s's write with token %d was accepted (write %d) after %s's with token %d (write %d)",
						w.Holder, w.Token, w.Seq, maxTok.Holder, maxTok.Token, maxTok.Seq)})
			}
			if latest != nil && latest.GrantedAt >= w.ValidUntil && !excused(latest, w, resets) {
				out = append(out, Violation{Kind: LateWrite, Key: k, A: w.grant(), B: latest.grant(),
					Writes: []Write{*latest, *w}, Detail: fmt.Sprintf(
						"%s's write (sent %v, %v past its validity %v) was accepted (write %d) after the write of %s (write %d), granted at %v, after that validity ended",
						w.Holder, ms(w.SentAt), ms(w.SentAt-w.ValidUntil), ms(w.ValidUntil), w.Seq, latest.Holder, latest.Seq, ms(latest.GrantedAt))})
			}
			if maxTok == nil || w.Token > maxTok.Token {
				maxTok = w
			}
			if latest == nil || w.GrantedAt > latest.GrantedAt {
				latest = w
			}
		}
	}
	return out
}

// excused reports whether two fenced writes straddle a fence reset: across
// one, tokens may go backwards (the fencing precondition was broken on
// purpose), so the resource may accept the older holder's larger token.
func excused(later, w *Write, resets []Reset) bool {
	return later.Token > 0 && w.Token > 0 && resetBetween(resets, w.GrantedAt, later.GrantedAt)
}

// AddWrite records a write to the protected resource.
func (l *Log) AddWrite(w Write) { l.writes = append(l.writes, w) }
