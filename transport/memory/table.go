package memory

// table is one shard's keyspace: an open-addressing hash table with linear
// probing, keyed by the key and its hash (Master.hash). It replaces a
// map[string]entry because a Go map hashes the key again on every access:
// a lock op touched the key three times (the shard pick, the lookup, then
// the insert or delete), each hashing 40-odd bytes, and the map ops came to
// about 500 of the op's 690 instructions at 256 lockers (BENCHMARKS.md,
// "mem17"). Here the hash is computed once per op and picks both the shard
// (its low bits) and the slot (the bits above), and a probe compares stored
// hashes before strings.
//
// Deletion shifts the following entries of a probe run back (no
// tombstones), so a lookup stops at the first empty slot and the table
// never fills with dead slots under the insert-delete pattern of locks.
// The caller holds the shard's lock for every method.
type table struct {
	slots []slot // a power of two in length, or nil
	n     int    // occupied slots, expired or not
	// cursor is where the next sweep starts: sweeps walk the table round
	// and round, so every entry is looked at within a bounded number of
	// sweeps (a Go map's random iteration start sampled instead).
	cursor int
}

type slot struct {
	h   uint64 // the key's hash; 0 marks an empty slot (Master.hash never returns 0)
	key string
	e   entry
}

const (
	minSlots = 8
	// A table grows past three quarters full. One of more than keepSlots
	// slots shrinks once under an eighth full (checked after sweeps); a
	// smaller one is kept as it is, even empty: the few keys of a quiet
	// shard come and go with every lock, and a table freed and made again
	// for them cost more allocation than the locks themselves.
	growNum, growDen = 3, 4
	shrinkDen        = 8
	keepSlots        = 64
)

func (t *table) home(h uint64) int { return int(h>>shardBits) & (len(t.slots) - 1) }

// find returns key's slot index, or -1.
func (t *table) find(key string, h uint64) int {
	if t.n == 0 {
		return -1
	}
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == h && s.key == key {
			return i
		}
		if s.h == 0 {
			return -1 // never full (growNum/growDen), so every probe ends
		}
	}
}

// get returns key's entry, expired or not, and whether it is stored.
func (t *table) get(key string, h uint64) (entry, bool) {
	if i := t.find(key, h); i >= 0 {
		return t.slots[i].e, true
	}
	return entry{}, false
}

// put stores e under key.
func (t *table) put(key string, h uint64, e entry) {
	if i := t.find(key, h); i >= 0 {
		t.slots[i].e = e
		return
	}
	t.add(key, h, e)
}

// add stores e under key, which the caller found missing (find): a second
// probe for it would find nothing.
func (t *table) add(key string, h uint64, e entry) {
	if (t.n+1)*growDen > len(t.slots)*growNum {
		t.resize(max(minSlots, 2*len(t.slots)))
	}
	t.insert(slot{h: h, key: key, e: e})
}

// insert places s, whose key is not stored, in the first free slot of its
// probe run.
func (t *table) insert(s slot) {
	mask := len(t.slots) - 1
	i := t.home(s.h)
	for t.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
	t.n++
}

// del removes key if it is stored.
func (t *table) del(key string, h uint64) {
	if i := t.find(key, h); i >= 0 {
		t.removeAt(i)
	}
}

// removeAt empties slot i and moves back every later entry of the probe run
// whose home is not between the hole and itself, so that no lookup meets an
// empty slot before its key.
func (t *table) removeAt(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].h != 0; j = (j + 1) & mask {
		k := t.home(t.slots[j].h)
		// The entry at j may stay if its home k lies cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = slot{} // drop the strings for the collector
	t.n--
}

func (t *table) resize(size int) {
	old := t.slots
	t.slots, t.n, t.cursor = make([]slot, size), 0, 0
	for i := range old {
		if old[i].h != 0 {
			t.insert(old[i])
		}
	}
}

// shrink gives back the memory of a table that sweeps and deletes have left
// mostly empty, as Restart gives back a whole run's.
func (t *table) shrink() {
	if len(t.slots) > keepSlots && t.n*shrinkDen < len(t.slots) {
		size := len(t.slots)
		for size > keepSlots && t.n*shrinkDen < size {
			size /= 2
		}
		t.resize(size)
	}
}

// sweepRound looks at up to sample stored entries from the cursor on,
// visiting at most 4*sample slots and no slot twice, and deletes the
// expired ones. It reports how many it looked at and how many it deleted.
func (t *table) sweepRound(now int64, sample int) (seen, expired int) {
	if t.n == 0 {
		return 0, 0
	}
	mask := len(t.slots) - 1
	i := t.cursor & mask
	for visits := 0; visits < min(4*sample, len(t.slots)) && seen < sample; visits++ {
		s := &t.slots[i]
		if s.h == 0 {
			i = (i + 1) & mask
			continue
		}
		seen++
		if s.e.expires <= now {
			// A later entry may move into i: look at i again.
			t.removeAt(i)
			expired++
			if t.n == 0 {
				break
			}
			continue
		}
		i = (i + 1) & mask
	}
	t.cursor = i
	return seen, expired
}
