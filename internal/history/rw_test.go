package history

import (
	"testing"
)

func reader(gr Grant) Grant { gr.Shared = true; return gr }

// The writer-overlap rule on crafted histories: readers may overlap each
// other; a writer overlaps nobody, reader or writer, in sections or in
// grant windows; and a key with no reader keeps the mutex rules.
func TestCheckShared(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      History
		want   []Kind
		detail string
	}{
		{"readers overlap freely", History{Grants: []Grant{
			reader(g("k", "r1", 0, 0, 100, 90, 10, 80)),
			reader(g("k", "r2", 0, 5, 100, 95, 20, 85)),
			reader(g("k", "r3", 0, 50, 150, 140, 60, 130)),
		}}, nil, ""},
		{"writer after readers, readers after writer", History{Grants: []Grant{
			reader(g("k", "r1", 0, 0, 100, 40, 10, 30)),
			reader(g("k", "r2", 0, 5, 100, 45, 15, 35)),
			g("k", "w", 0, 50, 200, 90, 60, 80),
			reader(g("k", "r3", 0, 100, 200, 150, 110, 140)),
		}}, nil, ""},
		{"writer inside a reader's section", History{Grants: []Grant{
			reader(g("k", "r1", 0, 0, 100, 90, 10, 80)),
			g("k", "w", 0, 50, 150, 140, 60, 130),
		}}, []Kind{WriterOverlap}, "reader r1 ran"},
		{"reader inside a writer's section", History{Grants: []Grant{
			reader(g("k", "long", 0, 0, 500, 490, 1, 480)),
			g("k", "w", 0, 600, 700, 690, 610, 680),
			reader(g("k", "late", 0, 650, 800, 790, 660, 780)),
		}}, []Kind{WriterOverlap}, "writer w ran"},
		{"reader inside a writer that starts under an earlier reader", History{Grants: []Grant{
			// r1 reaches furthest when r2 starts: r2 must still be paired
			// with the writer, which a sweep over every holder would miss.
			reader(g("k", "r1", 0, 0, 500, 490, 1, 480)),
			g("k", "w", 0, 10, 100, 90, 20, 80),
			reader(g("k", "r2", 0, 30, 100, 90, 40, 70)),
		}}, []Kind{WriterOverlap, WriterOverlap}, "reader r1"},
		{"two writers", History{Grants: []Grant{
			reader(g("k", "r", 0, 0, 10, 5, 1, 4)),
			g("k", "w1", 0, 20, 100, 90, 30, 80),
			g("k", "w2", 0, 50, 150, 140, 60, 130),
		}}, []Kind{WriterOverlap}, "writer w1"},
		{"windows only: sections apart", History{Grants: []Grant{
			reader(g("k", "r", 0, 0, 100, 90, 10, 20)),
			g("k", "w", 0, 50, 150, 140, 60, 130),
		}}, []Kind{WriterOverlap}, "held it over"},
		{"reader overrun", History{Grants: []Grant{
			reader(g("k", "r", 0, 0, 100, 120, 10, 110)),
		}}, []Kind{Overrun}, ""},
		{"no reader: mutex rules", History{Grants: []Grant{
			g("k", "a", 0, 0, 100, 90, 10, 80),
			g("k", "b", 0, 50, 150, 140, 60, 130),
		}}, []Kind{Overlap}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkKinds(t, tc.h, tc.want, tc.detail) })
	}
}
