package torture

import (
	"context"
	"fmt"
	"slices"

	"github.com/quorumlock/redlock/api"
)

// Workloads: what the clients do. Clients are dealt to the workloads in
// turn (client c of each engine runs Workloads[c%len]).
const (
	// WorkloadMutex: Lock/TryLock of the shared keys (client.go).
	WorkloadMutex = "mutex"
	// WorkloadSemaphore: Semaphore/TrySemaphore of a few semaphores of 1
	// to semMaxPermits permits; every permit is recorded with its
	// semaphore, so the checker applies "never more than P holders" on top
	// of the per-slot rules (each slot is an ordinary lock key)
	// (semaphore.go).
	WorkloadSemaphore = "semaphore"
	// WorkloadRW: readers and writers of a few read-write keys (rw.go).
	WorkloadRW = "rw"
)

// AllWorkloads lists every workload, in report order.
var AllWorkloads = []string{WorkloadMutex, WorkloadSemaphore, WorkloadRW}

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
	switch r.workload(c) {
	case WorkloadSemaphore:
		r.semClient(ctx, eng, e, c)
	case WorkloadRW:
		r.rwClient(ctx, eng, e, c)
	default:
		r.client(ctx, eng, e, c)
	}
}
