package history

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const ms1 = time.Millisecond

// g builds a grant held from at to until, released at rel (0: never), whose
// section ran [s, e] (e 0: no section), with token tok.
func g(key, holder string, tok int64, at, until, rel, s, e time.Duration) Grant {
	gr := Grant{Key: key, Holder: holder, Token: tok, GrantedAt: at * ms1, ValidUntil: until * ms1}
	if rel > 0 {
		gr.Released, gr.ReleasedAt = true, rel*ms1
	}
	if e > 0 {
		gr.Ran, gr.Start, gr.End = true, s*ms1, e*ms1
	}
	return gr
}

func signaled(gr Grant) Grant { gr.Signaled = true; return gr }

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      History
		want   []Kind
		detail string // in the first violation's detail
	}{
		{name: "empty"},
		{name: "sequential holders", h: History{Grants: []Grant{
			g("k", "a", 1, 0, 1000, 12, 1, 11),
			g("k", "b", 2, 13, 1013, 30, 14, 29),
			g("k", "c", 3, 31, 1031, 40, 32, 39),
		}}},
		{name: "next grant right after the release, long before the first's validity ends", h: History{Grants: []Grant{
			g("k", "a", 1, 0, 1000, 5, 1, 4),
			g("k", "b", 2, 6, 1006, 0, 7, 8),
		}}},
		{name: "next grant after an unreleased lock expired", h: History{Grants: []Grant{
			g("k", "a", 1, 0, 100, 0, 1, 50),
			g("k", "b", 2, 101, 200, 150, 102, 140),
		}}},
		{name: "different keys do not interact", h: History{Grants: []Grant{
			g("k1", "a", 5, 0, 100, 50, 1, 49),
			g("k2", "b", 1, 10, 110, 60, 11, 59),
		}}},
		{name: "sections overlap", h: History{Grants: []Grant{
			g("k", "a", 0, 0, 1000, 400, 10, 300),
			g("k", "b", 0, 200, 1200, 500, 210, 450),
		}}, want: []Kind{Overlap}, detail: "a ran [10.000ms, 300.000ms] and b ran [210.000ms, 450.000ms] (clipped to validity): 90.000ms of overlap"},
		{name: "the overlap is reported once, not again as grant-overlap", h: History{Grants: []Grant{
			g("k", "a", 0, 0, 1000, 400, 10, 300),
			g("k", "b", 0, 200, 1200, 500, 210, 450),
			g("k", "c", 0, 2000, 3000, 2500, 2001, 2400),
		}}, want: []Kind{Overlap}},
		{name: "a section past validity with the signal, the next holder after validity", h: History{Grants: []Grant{
			signaled(g("k", "a", 1, 0, 100, 160, 1, 150)),
			g("k", "b", 2, 120, 220, 200, 121, 199),
		}}},
		{name: "windows overlap while sections do not", h: History{Grants: []Grant{
			g("k", "a", 0, 0, 1000, 0, 1, 2),
			g("k", "b", 0, 500, 1500, 600, 501, 502),
		}}, want: []Kind{GrantOverlap}, detail: "a held it over [0.000ms, 1000.000ms] and b over [500.000ms, 600.000ms]"},
		{name: "grant recorded after its validity is not a window", h: History{Grants: []Grant{
			g("k", "a", 7, 150, 100, 151, 0, 0),
			g("k", "b", 3, 120, 220, 200, 121, 199),
		}}},
		{name: "equal tokens", h: History{Grants: []Grant{
			g("k", "a", 4, 0, 100, 10, 1, 9),
			g("k", "b", 4, 11, 111, 20, 12, 19),
		}}, want: []Kind{TokenOrder}, detail: "b got token 4 at 11.000ms, after a got token 4 at 0.000ms"},
		// On a fake clock (synctest) a release and the next grant can share a
		// timestamp: their order is unknown, not reversed; equal tokens are
		// wrong in any order.
		{name: "grants at one instant are not ordered against their tokens",
			h: History{Grants: []Grant{g("k", "b", 5, 10, 110, 10, 0, 0), g("k", "a", 4, 10, 110, 10, 0, 0)}}},
		{name: "equal tokens at one instant", want: []Kind{TokenOrder},
			h: History{Grants: []Grant{g("k", "a", 4, 10, 110, 10, 0, 0), g("k", "b", 4, 10, 110, 10, 0, 0)}}},
		{name: "token goes down", h: History{Grants: []Grant{
			g("k", "a", 4, 0, 100, 10, 1, 9),
			g("k", "b", 5, 11, 111, 20, 12, 19),
			g("k", "c", 2, 21, 121, 30, 22, 29),
		}}, want: []Kind{TokenOrder}},
		{name: "token goes down across a reset", h: History{Grants: []Grant{
			g("k", "a", 40, 0, 100, 10, 1, 9),
			g("k", "b", 1, 50, 150, 60, 51, 59),
			g("k", "c", 2, 70, 170, 80, 71, 79),
		}, Resets: []Reset{{From: 20 * ms1, To: 30 * ms1, Why: "majority killed"}}}},
		{name: "a reset elsewhere does not excuse", h: History{Grants: []Grant{
			g("k", "a", 40, 0, 100, 10, 1, 9),
			g("k", "b", 1, 50, 150, 60, 51, 59),
		}, Resets: []Reset{{From: 200 * ms1, To: 300 * ms1}}}, want: []Kind{TokenOrder}},
		{name: "unfenced grants are not compared", h: History{Grants: []Grant{
			g("k", "a", 0, 0, 100, 10, 1, 9),
			g("k", "b", 0, 11, 111, 20, 12, 19),
		}}},
		{name: "overrun without the signal", h: History{Grants: []Grant{
			g("k", "a", 1, 0, 100, 0, 1, 130),
		}}, want: []Kind{Overrun}, detail: "a ran until 130.000ms, 30.000ms past its validity (100.000ms), and the lost-lock signal had not fired"},
		{name: "overrun with the signal", h: History{Grants: []Grant{
			signaled(g("k", "a", 1, 0, 100, 0, 1, 130)),
		}}},
		{name: "everything at once", h: History{Grants: []Grant{
			g("k", "a", 9, 0, 100, 0, 10, 130),
			g("k", "b", 3, 50, 150, 140, 60, 139),
		}}, want: []Kind{Overlap, TokenOrder, Overrun}},
		{name: "three-way overlap reports each later holder", h: History{Grants: []Grant{
			g("k", "a", 0, 0, 1000, 900, 1, 800),
			g("k", "b", 0, 100, 1100, 300, 101, 200),
			g("k", "c", 0, 400, 1400, 600, 401, 500),
		}}, want: []Kind{Overlap, Overlap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := checkKinds(t, tc.h, tc.want, tc.detail)
			for _, v := range vs {
				if v.A == nil || v.Key == "" || (v.Kind != Overrun && v.B == nil) {
					t.Errorf("incomplete violation %+v", v)
				}
				if _, err := json.Marshal(v); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestCheckManyKeysIsClean(t *testing.T) {
	var h History
	for k := range 50 {
		key := strconv.Itoa(k)
		for i := range 200 {
			base := time.Duration(k*100000+i*100) * ms1
			h.Grants = append(h.Grants, Grant{Key: key + "x", Holder: "h", Token: int64(i + 1),
				GrantedAt: base, ValidUntil: base + 1000*ms1, Released: true, ReleasedAt: base + 50*ms1,
				Ran: true, Start: base + ms1, End: base + 49*ms1})
		}
	}
	if vs := Check(h); len(vs) != 0 {
		t.Fatalf("%d violations in a clean history, first: %v", len(vs), vs[0])
	}
}

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for c := range 8 {
		l := r.Log()
		wg.Go(func() {
			for i := range 100 {
				tok := int64(c*1000 + i + 1)
				r.NoteToken("k", tok)
				now := r.Now()
				l.Add(Grant{Key: "k", Holder: "h", Token: tok, GrantedAt: now, ValidUntil: r.At(time.Now().Add(time.Second))})
			}
		})
	}
	r.Reset(Reset{From: 1, To: 2, Why: "test"})
	wg.Wait()
	h := r.History()
	if len(h.Grants) != 800 || r.Grants() != 800 || len(h.Resets) != 1 {
		t.Fatalf("%d grants (%d counted), %d resets", len(h.Grants), r.Grants(), len(h.Resets))
	}
	if r.MaxToken("k") != 7100 || r.MaxToken("other") != 0 {
		t.Fatalf("MaxToken = %d", r.MaxToken("k"))
	}
	if r.At(r.Base()) != 0 || r.Now() <= 0 {
		t.Fatal("timebase")
	}
}

// checkKinds runs Check on h and requires the violations' kinds to be want,
// in order, and the first one's detail to contain detail (if given).
func checkKinds(t *testing.T, h History, want []Kind, detail string) []Violation {
	t.Helper()
	vs := Check(h)
	var kinds []Kind
	for _, v := range vs {
		kinds = append(kinds, v.Kind)
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("violations %v, want %v:\n%v", kinds, want, vs)
	}
	if detail != "" && !strings.Contains(vs[0].Detail, detail) {
		t.Errorf("detail %q does not contain %q", vs[0].Detail, detail)
	}
	return vs
}
