package torture

import (
	"strconv"
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/history"
)

// A fault that leaves fewer than a majority of masters with a semaphore
// slot's largest token is a fence reset, as it is for a mutex key: a permit
// is a fenced lock on its slot key, and a later permit of that slot may
// rightly get a smaller token across it. The check once read the mutex
// keys' counters alone, so such a regression on a slot was reported as a
// token-order violation (seen in a 4-minute run of seed 28: two slots
// whose long-held permits, tokens 8432 and 6211, were followed 2 s later by
// tokens 8423 and 6204).
func TestFenceResetCoversSemaphoreSlots(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workloads = []string{WorkloadMutex, WorkloadSemaphore}
	for i := range semaphores {
		for s := range 1 + i%semMaxPermits {
			slot := api.SemaphoreSlot("torture-sem:"+strconv.Itoa(i), s)
			r := &run{cfg: cfg, quorum: Masters/2 + 1, rec: history.NewRecorder()}
			r.initKeys()
			r.rec.NoteToken(slot, 100)
			// After the fault one master keeps the slot's largest token;
			// the others are behind it.
			counters := make([]map[string]int64, Masters)
			for m := range counters {
				counters[m] = map[string]int64{slot: 90}
			}
			counters[0][slot] = 100
			if k, keep, tok, short := r.fenceShort(r.fenceWant(), counters); !short || k != slot || keep != 1 || tok != 100 {
				t.Fatalf("one master of %d keeps %s's token 100: fenceShort = %q, %d, %d, %v; want it short on the slot",
					Masters, slot, k, keep, tok, short)
			}
			counters[1][slot], counters[2][slot] = 100, 100
			if k, _, _, short := r.fenceShort(r.fenceWant(), counters); short {
				t.Fatalf("a majority keeps %s's token: reported short on %q", slot, k)
			}
		}
	}
}
