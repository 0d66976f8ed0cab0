package actors

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/quorumlock/redlock/api"
)

// SameServerError is the error for masters i and j (0-based), named a and
// b, that turned out to be one server process with run id runID: two names
// for one host, two database numbers, a proxy and the server behind it. One
// process must never supply two votes: the masters must be independent
// (README, "Guarantees, and their limits").
func SameServerError(i, j int, a, b, runID string) error {
	return fmt.Errorf("%w: masters %d (%q) and %d (%q) are one server (run_id %s): a server counted twice would vote twice; list each once",
		api.ErrInvalidArgument, i+1, a, j+1, b, runID)
}

// twins is the nodes' shared record of the run id each one last read, so
// that masters found to be one server at run time (an entry that was down
// at construction, or an address that later reaches another entry's
// server) do not vote while they are. The engine refuses such a
// configuration at construction when it can see it then.
//
// Nodes write it when they learn a run id (rarely) and read it for every
// batch they vet, so the verdict is kept per node in an atomic: vetting
// takes no lock.
type twins struct {
	names  []string
	logger *slog.Logger

	mu  sync.Mutex
	ids []string // by node: the run id last read, "" while unknown

	errs []atomic.Pointer[error] // by node: why it may not vote, nil if it may
}

func newTwins(names []string, logger *slog.Logger) *twins {
	return &twins{names: names, logger: logger, ids: make([]string, len(names)), errs: make([]atomic.Pointer[error], len(names))}
}

// set records that node i now reads run id id ("" for unknown: a master we
// cannot read does not vote anyway, and a stale id must not bar the node
// that reaches that server now).
func (tw *twins) set(i int, id string) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.ids[i] == id {
		return
	}
	tw.ids[i] = id
	formed := false
	for k, idk := range tw.ids {
		var err error
		if idk != "" {
			for j, idj := range tw.ids {
				if j != k && idj == idk {
					lo, hi := min(j, k), max(j, k)
					err = SameServerError(lo, hi, tw.names[lo], tw.names[hi], idk)
					formed = formed || k == i
					break
				}
			}
		}
		if err == nil {
			tw.errs[k].Store(nil)
		} else {
			tw.errs[k].Store(&err)
		}
	}
	if formed {
		tw.logger.Error("redlock: two masters are one server; neither votes while both reach it", "error", *tw.errs[i].Load())
	}
}

// err is why node i may not vote, or nil.
func (tw *twins) err(i int) error {
	if p := tw.errs[i].Load(); p != nil {
		return *p
	}
	return nil
}
