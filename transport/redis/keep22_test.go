package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// TestNoScriptReleaseBeforeWriteBack: after a SCRIPT FLUSH, another client
// has loaded the write-back's script again but not the release's. A batch
// [Release(k, a), RaiseFence(k)] then meets NOSCRIPT on the release and runs
// the write-back. The two touch different keys on the master (the lock key,
// its counter), so the release must be resent and delete k. Ordering the
// write-back by its lock key (as the cluster transport did until ask21)
// fails the release "not resent", and an Unlock that sent it leaves k on the
// master until its TTL.
func TestNoScriptReleaseBeforeWriteBack(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	for _, coalesce := range []int{1, 0} {
		tr := dial(t, Config{Addr: s.Addr, Coalesce: coalesce})
		s.Do(t, nil, "FLUSHALL")
		// Two releases, so that they go as a group when coalescing.
		mustDo(t, tr, []transport.Op{acq("k", "a", time.Minute), acq("j", "b", time.Minute)}, true, true)
		s.Do(t, nil, "SCRIPT", "FLUSH")
		s.Do(t, nil, "SCRIPT", "LOAD", RaiseFenceScript)
		res, err := do(tr, rel("j", "b"), rel("k", "a"), raise("k", 5, "a"))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || !r.OK {
				t.Errorf("Coalesce %d: op %d: %+v (not resent: %v), want OK", coalesce, i, r, errors.Is(r.Err, errNotResent))
			}
		}
		if v, ok := s.Get(t, "k"); ok {
			t.Errorf("Coalesce %d: k = %q after its release: the release met NOSCRIPT before a write-back of k's counter and was not resent", coalesce, v)
		}
	}
}
