package memory

import "github.com/quorumlock/redlock/transport"

// readers is what a key holds while it has read-write readers: each
// reader's and each waiting writer's expiry (monotime), by value. The
// Redis transport keeps the same at the key as one sorted set.
type readers struct {
	r map[string]int64 // live readers
	w map[string]int64 // writers waiting on the readers (transport.AcquireExclusive)
}

// prune drops the expired members and returns the latest expiry left (0 if
// none), which is the key's own.
func (rd *readers) prune(now int64) int64 {
	var last int64
	for _, set := range [2]map[string]int64{rd.r, rd.w} {
		for v, exp := range set {
			if exp <= now {
				delete(set, v)
			} else if exp > last {
				last = exp
			}
		}
	}
	return last
}

// applyShared runs a valid read-write op (transport.AcquireShared and the
// others) on one key.
func (m *Master) applyShared(op *transport.Op) bool {
	s := m.shard(op.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := monotime()
	s.tick(now)
	e, found := s.m[op.Key]
	if found && e.expires <= now {
		delete(s.m, op.Key)
		found = false
	}
	if found && e.rd == nil {
		// A writer (or a plain lock) holds the key.
		switch op.Kind {
		case transport.ReleaseShared:
			if e.value == op.Value {
				delete(s.m, op.Key)
				return true
			}
		case transport.ExtendShared:
			if e.value == op.Value {
				s.m[op.Key] = entry{value: e.value, expires: deadline(now, op.TTL)}
				return true
			}
		}
		return false
	}
	var rd *readers
	if found {
		rd = e.rd
		rd.prune(now)
	}
	switch op.Kind {
	case transport.AcquireShared:
		if rd == nil {
			rd = &readers{r: make(map[string]int64, 1)}
		} else if len(rd.w) > 0 {
			return false // a writer waits: no new reader until it got in or gave up
		}
		rd.r[op.Value] = deadline(now, op.TTL)
	case transport.AcquireExclusive:
		if rd != nil && len(rd.r) > 0 {
			if rd.w == nil {
				rd.w = make(map[string]int64, 1)
			}
			rd.w[op.Value] = deadline(now, op.TTL)
			s.m[op.Key] = entry{expires: rd.prune(now), rd: rd}
			return false
		}
		// Free, or only markers (its own or other writers'): they go with
		// the grant, as on Redis the key is replaced.
		s.m[op.Key] = entry{value: op.Value, expires: deadline(now, op.TTL)}
		return true
	case transport.ReleaseShared:
		if rd == nil {
			return false
		}
		_, had := rd.r[op.Value]
		delete(rd.r, op.Value)
		delete(rd.w, op.Value)
		m.storeReaders(s, op.Key, rd, now)
		return had
	case transport.ExtendShared:
		if rd == nil {
			return false
		}
		if _, live := rd.r[op.Value]; !live {
			return false
		}
		rd.r[op.Value] = deadline(now, op.TTL)
	}
	m.storeReaders(s, op.Key, rd, now)
	return true
}

// storeReaders writes key back with its expiry at its latest member, or
// deletes it when none is left. The caller holds s.
func (m *Master) storeReaders(s *shard, key string, rd *readers, now int64) {
	if last := rd.prune(now); last > now {
		s.m[key] = entry{expires: last, rd: rd}
	} else {
		delete(s.m, key)
	}
}

// Readers returns the number of live readers of key (AcquireShared), for
// tests.
func (m *Master) Readers(key string) int {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok || e.rd == nil {
		return 0
	}
	now := monotime()
	n := 0
	for _, exp := range e.rd.r {
		if exp > now {
			n++
		}
	}
	return n
}
