package torture

import (
	"context"
	"fmt"
	"slices"

	"github.com/quorumlock/redlock/api"
)

// Workloads: what the clients do. Clients are dealt to the workloads in
// turn (client c of each engine runs Workloads[c%len]).
//
// (The same selection as the semaphore branch's, issue 11: at merge, keep
// one copy of what is here and list every workload in AllWorkloads and
// runClient.)
const (
	// WorkloadMutex: Lock/TryLock of the shared keys (client.go).
	WorkloadMutex = "mutex"
	// WorkloadRW: readers and writers of a few read-write keys (rw.go).
	WorkloadRW = "rw"
)

// AllWorkloads lists every workload, in report order.
var AllWorkloads = []string{WorkloadMutex, WorkloadRW}

func (c *Config) validateWorkloads() error {
	// None given is the mutex alone, the workload before there was a
	// choice.
	seen := map[string]bool{}
	for _, w := range c.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			return fmt.Errorf("--workloads: unknown workload %q; want a comma-separated list of %v", w, AllWorkloads)
		}
		if seen[w] {
			return fmt.Errorf("--workloads: %q listed twice", w)
		}
		seen[w] = true
	}
	return nil
}

// workload is what client c runs.
func (r *run) workload(c int) string {
	if len(r.cfg.Workloads) == 0 {
		return WorkloadMutex
	}
	return r.cfg.Workloads[c%len(r.cfg.Workloads)]
}

// runClient runs client c of engine e with its workload.
func (r *run) runClient(ctx context.Context, eng api.Locker, e, c int) {
	if r.workload(c) == WorkloadRW {
		r.rwClient(ctx, eng, e, c)
		return
	}
	r.client(ctx, eng, e, c)
}
