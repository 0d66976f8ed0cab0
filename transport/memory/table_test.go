package memory

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestTableAgainstMap runs random puts, deletes, sweeps and shrinks on a
// table and on a Go map side by side, with hashes drawn from a few values so
// that probe runs collide, wrap around the end of the table and get
// entries shifted back by deletes, and checks after every step that both
// hold the same keys and entries.
func TestTableAgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var tb table
		model := map[string]entry{}
		hashOf := map[string]uint64{}
		hash := func(k string) uint64 {
			if h, ok := hashOf[k]; ok {
				return h
			}
			// Few homes in any table size: long runs and wrap-arounds.
			home := uint64(r.IntN(5))
			if r.IntN(2) == 0 {
				home = 1<<30 - 1 - uint64(r.IntN(3)) // the last slots of any table: runs wrap around
			}
			h := home<<shardBits | uint64(r.IntN(1<<shardBits)) | 1<<63
			hashOf[k] = h
			return h
		}
		now := int64(1000)
		for step := range 3000 {
			k := "k" + strconv.Itoa(r.IntN(200))
			h := hash(k)
			switch op := r.IntN(10); {
			case op < 5:
				e := entry{value: strconv.Itoa(step), expires: now + int64(r.IntN(100))}
				tb.put(k, h, e)
				model[k] = e
			case op < 8:
				tb.del(k, h)
				delete(model, k)
			case op < 9:
				now += int64(r.IntN(30))
				_, _ = tb.sweepRound(now, 1+r.IntN(sweepSample))
				for mk, e := range model {
					if _, ok := tb.get(mk, hash(mk)); !ok && e.expires <= now {
						delete(model, mk) // swept: expired entries only
					}
				}
			default:
				tb.shrink()
			}
			if tb.n != len(model) {
				t.Fatalf("seed %d step %d: table holds %d entries, model %d", seed, step, tb.n, len(model))
			}
			for mk, e := range model {
				if got, ok := tb.get(mk, hash(mk)); !ok || got != e {
					t.Fatalf("seed %d step %d: key %s: table has %+v (%v), model %+v", seed, step, mk, got, ok, e)
				}
			}
			if len(tb.slots) > 0 && tb.n*growDen > len(tb.slots)*growNum {
				t.Fatalf("seed %d step %d: %d of %d slots used", seed, step, tb.n, len(tb.slots))
			}
		}
	}
}

// TestTableSweepOnlyExpired shows that a sweep deletes expired entries and
// nothing else, however the deletes shift the entries behind them.
func TestTableSweepOnlyExpired(t *testing.T) {
	var tb table
	for i := range 1000 {
		h := uint64(i%7)<<shardBits | 1<<63
		tb.put("k"+strconv.Itoa(i), h, entry{expires: int64(i%2) * 2}) // odd keys live at now=1
	}
	for range 1000 {
		tb.sweepRound(1, sweepSample)
	}
	if tb.n != 500 {
		t.Fatalf("after sweeps %d entries, want the 500 live ones", tb.n)
	}
	for i := 1; i < 1000; i += 2 {
		if _, ok := tb.get("k"+strconv.Itoa(i), uint64(i%7)<<shardBits|1<<63); !ok {
			t.Fatalf("live key k%d was swept", i)
		}
	}
}
