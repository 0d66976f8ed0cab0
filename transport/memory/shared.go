package memory

import (
	"math"

	"github.com/quorumlock/redlock/transport"
)

// member is one reader of a key, or one writer waiting on its readers
// (transport.AcquireExclusive's mark), with its expiry (monotime).
type member struct {
	value  string
	exp    int64
	writer bool
}

// readers is what a key holds while it has read-write readers or writers'
// marks. The Redis transport keeps the same at the key as one sorted set.
// Members are few (the readers of one key at one moment), so a slice
// scanned in full beats a map, and a key's first member lives in the
// struct's own array: a key with one reader costs one allocation.
type readers struct {
	m     []member
	first [1]member
}

func newReaders() *readers {
	rd := &readers{}
	rd.m = rd.first[:0]
	return rd
}

// prune drops the expired members and returns the latest expiry left
// (math.MinInt64 if none), which is the key's own, and how many live
// readers and writers' marks are left. Not 0 for none: inside a synctest
// bubble now is negative, and 0 would be a live expiry.
func (rd *readers) prune(now int64) (last int64, readers, writers int) {
	last = math.MinInt64
	kept := rd.m[:0]
	for _, mb := range rd.m {
		if mb.exp <= now {
			continue
		}
		kept = append(kept, mb)
		last = max(last, mb.exp)
		if mb.writer {
			writers++
		} else {
			readers++
		}
	}
	clear(rd.m[len(kept):]) // drop the removed values' strings
	rd.m = kept
	return last, readers, writers
}

// set makes value a member of its kind with expiry exp.
func (rd *readers) set(value string, writer bool, exp int64) {
	if i := rd.find(value, writer); i >= 0 {
		rd.m[i].exp = exp
		return
	}
	rd.m = append(rd.m, member{value: value, exp: exp, writer: writer})
}

// find returns the index of value's member of its kind, or -1.
func (rd *readers) find(value string, writer bool) int {
	for i := range rd.m {
		if rd.m[i].writer == writer && rd.m[i].value == value {
			return i
		}
	}
	return -1
}

// drop removes value's member of its kind and reports whether it was there.
func (rd *readers) drop(value string, writer bool) bool {
	i := rd.find(value, writer)
	if i < 0 {
		return false
	}
	last := len(rd.m) - 1
	rd.m[i] = rd.m[last]
	rd.m[last] = member{}
	rd.m = rd.m[:last]
	return true
}

// applyShared runs a valid read-write op (transport.AcquireShared and the
// others) on one key.
func (m *Master) applyShared(op *transport.Op, now int64) bool {
	s, h := m.locate(op.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick(now)
	e, found := s.m.get(op.Key, h)
	if found && e.expires <= now {
		s.m.del(op.Key, h)
		found = false
	}
	if found && e.rd == nil {
		// A writer (or a plain lock) holds the key.
		switch op.Kind {
		case transport.ReleaseShared:
			if e.value == op.Value {
				s.m.del(op.Key, h)
				return true
			}
		case transport.ExtendShared:
			if e.value == op.Value {
				s.m.put(op.Key, h, entry{value: e.value, expires: deadline(now, op.TTL)})
				return true
			}
		}
		return false
	}
	var (
		rd               *readers
		nreaders, nmarks int
	)
	if found {
		rd = e.rd
		_, nreaders, nmarks = rd.prune(now)
	}
	switch op.Kind {
	case transport.AcquireShared:
		if rd == nil {
			rd = newReaders()
		} else if nmarks > 0 {
			return false // a writer waits: no new reader until it got in or gave up
		}
		rd.set(op.Value, false, deadline(now, op.TTL))
	case transport.AcquireExclusive:
		if nreaders > 0 {
			rd.set(op.Value, true, deadline(now, op.TTL))
			m.storeReaders(s, op.Key, h, rd, now)
			return false
		}
		// Free, or only marks (its own or other writers'): they go with
		// the grant, as on Redis the key is replaced.
		s.m.put(op.Key, h, entry{value: op.Value, expires: deadline(now, op.TTL)})
		return true
	case transport.ReleaseShared:
		if rd == nil {
			return false
		}
		had := rd.drop(op.Value, false)
		rd.drop(op.Value, true)
		m.storeReaders(s, op.Key, h, rd, now)
		return had
	case transport.ExtendShared:
		if rd == nil {
			return false
		}
		i := rd.find(op.Value, false)
		if i < 0 {
			return false
		}
		rd.m[i].exp = deadline(now, op.TTL)
	}
	m.storeReaders(s, op.Key, h, rd, now)
	return true
}

// storeReaders writes key back with its expiry at its latest member, or
// deletes it when none is left. The caller holds s.
func (m *Master) storeReaders(s *shard, key string, h uint64, rd *readers, now int64) {
	if last, _, _ := rd.prune(now); last > now {
		s.m.put(key, h, entry{expires: last, rd: rd})
	} else {
		s.m.del(key, h)
	}
}

// Readers returns the number of live readers of key (AcquireShared), for
// tests.
func (m *Master) Readers(key string) int {
	s, h := m.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m.get(key, h)
	if !ok || e.rd == nil {
		return 0
	}
	now := monotime()
	n := 0
	for _, mb := range e.rd.m {
		if !mb.writer && mb.exp > now {
			n++
		}
	}
	return n
}
