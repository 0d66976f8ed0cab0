package history

import (
	"encoding/json"
	"testing"
	"time"
)

// wr builds a write by holder with token tok, granted at at and valid until
// until, sent at sent, accepted as write seq (0: refused).
func wr(key, holder string, tok int64, at, until, sent time.Duration, seq int64) Write {
	return Write{Key: key, Holder: holder, Token: tok, GrantedAt: at * ms1, ValidUntil: until * ms1,
		SentAt: sent * ms1, AckedAt: (sent + 1) * ms1, Accepted: seq > 0, Seq: seq}
}

func TestCheckWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ws     []Write
		resets []Reset
		want   []Kind
		detail string
	}{
		{name: "holders in turn, fenced", ws: []Write{
			wr("k", "a", 1, 0, 100, 1, 1),
			wr("k", "b", 2, 10, 110, 11, 2),
			wr("k", "c", 3, 120, 220, 121, 3),
		}},
		{name: "holders in turn, unfenced", ws: []Write{
			wr("k", "a", 0, 0, 100, 1, 1),
			wr("k", "b", 0, 10, 110, 11, 2),
			wr("k", "c", 0, 120, 220, 121, 3),
		}},
		{name: "the paused holder's stale write is refused", ws: []Write{
			wr("k", "a", 5, 0, 100, 300, 0), // refused
			wr("k", "b", 6, 150, 250, 151, 1),
		}},
		{name: "a paused holder's write accepted before the next holder writes is harmless", ws: []Write{
			wr("k", "a", 5, 0, 100, 300, 1),
			wr("k", "b", 6, 150, 250, 310, 2),
		}},
		{name: "the resource accepts a smaller token", ws: []Write{
			wr("k", "b", 6, 150, 250, 151, 1),
			wr("k", "a", 5, 140, 240, 160, 2),
		}, want: []Kind{StaleWrite}, detail: "a's write with token 5 was accepted (write 2) after b's with token 6 (write 1)"},
		{name: "the paused holder's write lands on the next holder's, unfenced", ws: []Write{
			wr("k", "b", 0, 150, 250, 151, 1),
			wr("k", "a", 0, 0, 100, 300, 2),
		}, want: []Kind{LateWrite}, detail: "a's write (sent 300.000ms, 200.000ms past its validity 100.000ms) was accepted (write 2) after the write of b (write 1), granted at 150.000ms"},
		{name: "both rules when fenced and accepted anyway", ws: []Write{
			wr("k", "b", 6, 150, 250, 151, 1),
			wr("k", "a", 5, 0, 100, 300, 2),
		}, want: []Kind{StaleWrite, LateWrite}},
		{name: "tokens backwards across a fence reset", ws: []Write{
			wr("k", "b", 2, 150, 250, 151, 1),
			wr("k", "a", 9, 0, 100, 300, 2),
		}, resets: []Reset{{From: 110 * ms1, To: 120 * ms1}}},
		{name: "a reset does not excuse unfenced writes", ws: []Write{
			wr("k", "b", 0, 150, 250, 151, 1),
			wr("k", "a", 0, 0, 100, 300, 2),
		}, resets: []Reset{{From: 110 * ms1, To: 120 * ms1}}, want: []Kind{LateWrite}},
		{name: "the resource's order decides, not the slice order", ws: []Write{
			wr("k", "a", 0, 0, 100, 300, 1),
			wr("k", "b", 0, 150, 250, 151, 2), // sent earlier, applied later
		}},
		{name: "refused writes are not judged", ws: []Write{
			wr("k", "b", 6, 150, 250, 151, 1),
			wr("k", "a", 5, 0, 100, 300, 0),
		}},
		{name: "keys are judged apart", ws: []Write{
			wr("k1", "b", 6, 150, 250, 151, 1),
			wr("k2", "a", 5, 0, 100, 300, 1),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := checkKinds(t, History{Writes: tc.ws, Resets: tc.resets}, tc.want, tc.detail)
			for _, v := range vs {
				if v.A == nil || v.B == nil || v.Key == "" || len(v.Writes) != 2 || v.Writes[0].Seq >= v.Writes[1].Seq {
					t.Errorf("incomplete violation %+v", v)
				}
				if _, err := json.Marshal(v); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// A holder stopped during its section cannot act on the lost-lock signal:
// overrun does not judge it (its writes are judged instead).
func TestPausedSectionIsNoOverrun(t *testing.T) {
	a := g("k", "a", 1, 0, 100, 0, 1, 130)
	if vs := Check(History{Grants: []Grant{a}}); len(vs) != 1 || vs[0].Kind != Overrun {
		t.Fatalf("unpaused: %v, want one overrun", vs)
	}
	a.Paused = true
	if vs := Check(History{Grants: []Grant{a}}); len(vs) != 0 {
		t.Fatalf("paused: %v, want none", vs)
	}
}

func TestRecorderWrites(t *testing.T) {
	r := NewRecorder()
	l1, l2 := r.Log(), r.Log()
	l1.AddWrite(wr("k", "a", 1, 0, 100, 1, 1))
	l2.AddWrite(wr("k", "b", 0, 0, 100, 1, 0))
	if h := r.History(); len(h.Writes) != 2 {
		t.Fatalf("%d writes, want 2", len(h.Writes))
	}
}
