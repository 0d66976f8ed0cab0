package history

import (
	"testing"
	"time"
)

// sg is a permit of semaphore sem (p permits) on key, held from at to
// until (ms), released at rel (0: never).
func sg(sem string, p int, key, holder string, at, until, rel time.Duration) Grant {
	gr := g(key, holder, 0, at, until, rel, 0, 0)
	gr.Semaphore, gr.Permits = sem, p
	return gr
}

func TestCheckSemaphore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      History
		want   []Kind
		detail string
	}{
		{name: "P holders at once", h: History{Grants: []Grant{
			sg("s", 2, "s0", "a", 0, 100, 50),
			sg("s", 2, "s1", "b", 10, 110, 60),
			sg("s", 2, "s0", "c", 50, 150, 90), // takes a's slot as a lets go
		}}},
		{name: "P+1 holders at once bites", h: History{Grants: []Grant{
			sg("s", 2, "s0", "a", 0, 100, 50),
			sg("s", 2, "s1", "b", 10, 110, 60),
			sg("s", 2, "s2", "c", 20, 120, 30),
		}}, want: []Kind{TooManyHolders}, detail: "3 holders of 2 permits at 20.000ms"},
		{name: "the naive counter's three majorities", h: History{Grants: []Grant{
			// Holders admitted on {A,B}, {B,C}, {A,C}: each master saw
			// two, the semaphore had three. Keys are the holders' own.
			sg("naive", 2, "naive#x", "x", 0, 100, 0),
			sg("naive", 2, "naive#y", "y", 1, 100, 0),
			sg("naive", 2, "naive#z", "z", 2, 100, 0),
		}}, want: []Kind{TooManyHolders}, detail: "3 holders of 2 permits"},
		{name: "one episode is reported once", h: History{Grants: []Grant{
			sg("s", 1, "s0", "a", 0, 100, 0),
			sg("s", 1, "k1", "b", 10, 100, 0),
			sg("s", 1, "k2", "c", 20, 100, 0),
		}}, want: []Kind{TooManyHolders}, detail: "2 holders of 1 permits"},
		{name: "a second episode is reported again", h: History{Grants: []Grant{
			sg("s", 1, "k0", "a", 0, 100, 0),
			sg("s", 1, "k1", "b", 10, 20, 0),
			sg("s", 1, "k2", "c", 30, 40, 0),
		}}, want: []Kind{TooManyHolders, TooManyHolders}},
		{name: "expired holders do not count", h: History{Grants: []Grant{
			sg("s", 1, "k0", "a", 0, 10, 0),
			sg("s", 1, "k1", "b", 10, 20, 0),
		}}},
		{name: "semaphores do not interact", h: History{Grants: []Grant{
			sg("s", 1, "s0", "a", 0, 100, 0),
			sg("t", 1, "t0", "b", 0, 100, 0),
		}}},
		{name: "the smallest permits count", h: History{Grants: []Grant{
			sg("s", 3, "k0", "a", 0, 100, 0),
			sg("s", 1, "k1", "b", 10, 100, 0),
		}}, want: []Kind{TooManyHolders}, detail: "2 holders of 1 permits"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkKinds(t, tc.h, tc.want, tc.detail) })
	}
}
