// Package bench measures lock clients under load: a client runs lock cycles
// (take a lock, release it) from C concurrent lockers, and a Recorder counts
// the outcomes and records every cycle's latency in an HDR histogram.
//
// Two workloads, the same for every client so that their figures compare:
//
//   - uncontended (Keys == 0): every cycle takes a fresh key with one attempt
//     (TryLock) and releases it: the cost of the lock itself.
//   - contended (Keys > 0): C lockers share Keys keys, C/Keys per key; a
//     cycle waits for its key (Lock, retrying) and releases it.
//
// The go test benchmarks of this directory run the workloads on the engine
// (bench_test.go) and, in the nested module bench/redsync, on
// go-redsync/redsync with the same names and metrics; bench/run.sh runs both
// against the same five redis-server processes. The redlock command's bench
// subcommand drives the same runner for a duration.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/quorumlock/redlock/api"
)

// ErrNotAcquired is what a Client's Cycle wraps when the lock was held by
// someone else: an outcome of contention, not a failure.
var ErrNotAcquired = errors.New("not acquired")

// Client is a lock client under test. Cycle takes the lock on key and
// releases it again. With wait false it makes one attempt (TryLock), with
// wait true it retries until the lock is held or ctx ends (Lock). It returns
// nil for a whole cycle, an error wrapping ErrNotAcquired when the lock was
// held by someone else, and any other error for a failure (including a
// release that failed). Cycle is called from many goroutines at once.
type Client interface {
	Cycle(ctx context.Context, key string, wait bool) error
}

// Engine adapts an api.Locker (the engine) to Client. opts are passed to
// every Lock and TryLock.
func Engine(l api.Locker, opts ...api.LockOption) Client { return engineClient{l: l, opts: opts} }

type engineClient struct {
	l    api.Locker
	opts []api.LockOption
}

func (c engineClient) Cycle(ctx context.Context, key string, wait bool) error {
	var (
		lk  api.Lock
		err error
	)
	if wait {
		lk, err = c.l.Lock(ctx, key, c.opts...)
	} else {
		lk, err = c.l.TryLock(ctx, key, c.opts...)
	}
	if err != nil {
		if errors.Is(err, api.ErrNotAcquired) {
			return fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		return err
	}
	return lk.Unlock(ctx)
}

// Workload is what the lockers do.
type Workload struct {
	// Concurrency is the number of lockers, each a goroutine running one
	// cycle after the other.
	Concurrency int
	// Keys is the number of keys the lockers share (contended, Lock); 0
	// gives every cycle a fresh key (uncontended, TryLock).
	Keys int
	// Prefix starts every key; make it unique per run, so that runs against
	// the same masters never meet each other's keys.
	Prefix string
}

// Name is the workload's benchmark name: "uncontended/c=256" or
// "contended/c=64/k=16".
func (w Workload) Name() string {
	if w.Keys == 0 {
		return "uncontended/c=" + strconv.Itoa(w.Concurrency)
	}
	return "contended/c=" + strconv.Itoa(w.Concurrency) + "/k=" + strconv.Itoa(w.Keys)
}

// Contended is the standard contended workload for c lockers: c/4 keys
// (at least one), so four lockers want each key.
func Contended(c int, prefix string) Workload {
	return Workload{Concurrency: c, Keys: max(1, c/4), Prefix: prefix}
}

// Uncontended is the uncontended workload for c lockers.
func Uncontended(c int, prefix string) Workload {
	return Workload{Concurrency: c, Prefix: prefix}
}

// RunPrefix returns a key prefix unique to this process and moment, for
// Workload.Prefix.
func RunPrefix(name string) string {
	return fmt.Sprintf("redlock-bench:%s:%x:", name, time.Now().UnixNano())
}

// Run runs w on client until n cycles have started (n > 0) or, with n == 0,
// until ctx ends, recording every finished cycle in rec. A cycle that ctx cut
// short is not recorded: it was interrupted, not measured. Run returns once
// every locker has stopped.
func Run(ctx context.Context, client Client, w Workload, n int64, rec *Recorder) {
	wait := w.Keys > 0
	var keys []string
	if wait {
		keys = make([]string, w.Keys)
		for i := range keys {
			keys[i] = w.Prefix + "k" + strconv.Itoa(i)
		}
	}
	var (
		started atomic.Int64
		fresh   atomic.Int64
		wg      sync.WaitGroup
	)
	c := w.Concurrency
	for worker := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := 0; ; i++ {
				if n > 0 {
					if started.Add(1) > n {
						return
					}
				} else if ctx.Err() != nil {
					return
				}
				var key string
				if wait {
					// Worker w takes keys w, w+C, w+2C, ... modulo K: with
					// C a multiple of K, exactly C/K lockers per key.
					key = keys[(worker+i*c)%len(keys)]
				} else {
					buf = strconv.AppendInt(append(buf[:0], w.Prefix...), fresh.Add(1), 10)
					key = string(buf)
				}
				t0 := time.Now()
				err := client.Cycle(ctx, key, wait)
				d := time.Since(t0)
				if err != nil && ctx.Err() != nil {
					return
				}
				rec.Record(worker, d, err)
			}
		}()
	}
	wg.Wait()
}

// readyPoll is how long WaitReady waits between attempts.
const readyPoll = 20 * time.Millisecond

// WaitReady waits until client can take a lock: it runs uncontended cycles
// (TryLock and Unlock of a fresh key under prefix) until one succeeds.
// Masters that just started may refuse connections for a moment, and with
// the restart quarantine on, fresh ones sit out their first period. It is
// the one readiness check of the module: the benchmarks, the redlock
// command (demo, bench) and the torture run all wait with it.
//
// It waits up to timeout, or longer when extend says so: extend, when not
// nil, sees every failed attempt's error and how long the wait has lasted,
// and returns how long it may last in all (the wait never shortens). On
// giving up, or when ctx ends, it returns the last attempt's error.
func WaitReady(ctx context.Context, client Client, prefix string, timeout time.Duration, extend func(err error, waited time.Duration) time.Duration) error {
	start := time.Now()
	deadline := start.Add(timeout)
	for i := 0; ; i++ {
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := client.Cycle(actx, prefix+"ready"+strconv.Itoa(i), false)
		cancel()
		if err == nil {
			return nil
		}
		if extend != nil {
			if d := start.Add(extend(err, time.Since(start))); d.After(deadline) {
				deadline = d
			}
		}
		if wait := time.Until(deadline); wait > 0 && ctx.Err() == nil {
			t := time.NewTimer(min(readyPoll, wait))
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		// Give up with this attempt's error rather than start one that
		// could only fail with the deadline's.
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
	}
}

// Histogram bounds: 1µs to 10 minutes, 3 significant digits.
const (
	minLatencyUS = 1
	maxLatencyUS = int64(10 * time.Minute / time.Microsecond)
	sigFigs      = 3
)

// shards is how many histograms a Recorder spreads its lockers over, so that
// they rarely wait for each other's mutex.
const shards = 16

// Recorder counts cycle outcomes and records their latencies. It is safe for
// concurrent use; Record is cheap (a mutex of one of 16 shards, no
// allocation).
type Recorder struct {
	shard [shards]struct {
		mu sync.Mutex
		h  *hdrhistogram.Histogram
		_  [40]byte // keep shards on separate cache lines
	}
	acquired    atomic.Int64
	notAcquired atomic.Int64
	errs        atomic.Int64
	firstErr    atomic.Pointer[error]
	// perWorker counts each locker's successful cycles, when TrackWorkers
	// asked for it (for fairness under contention).
	perWorker []atomic.Int64
}

// TrackWorkers makes r count the successful cycles of each of n lockers
// (workers 0 to n-1), for Fairness. Call it before the run.
func (r *Recorder) TrackWorkers(n int) { r.perWorker = make([]atomic.Int64, n) }

// Fairness describes how evenly the tracked lockers got the lock: the
// fewest and most successful cycles of one locker, their mean, and the
// coefficient of variation (standard deviation over mean; 0 is perfectly
// even). It is zero without TrackWorkers.
type Fairness struct {
	Min, Max   int64
	Mean, CV   float64
	Starved    int // lockers that never got the lock
	Lockers    int
	TotalGrant int64
}

// Fairness returns the spread of successful cycles per locker.
func (r *Recorder) Fairness() Fairness {
	f := Fairness{Lockers: len(r.perWorker)}
	if f.Lockers == 0 {
		return f
	}
	f.Min = math.MaxInt64
	for i := range r.perWorker {
		n := r.perWorker[i].Load()
		f.Min, f.Max = min(f.Min, n), max(f.Max, n)
		f.TotalGrant += n
		if n == 0 {
			f.Starved++
		}
	}
	f.Mean = float64(f.TotalGrant) / float64(f.Lockers)
	if f.Mean > 0 {
		var ss float64
		for i := range r.perWorker {
			d := float64(r.perWorker[i].Load()) - f.Mean
			ss += d * d
		}
		f.CV = math.Sqrt(ss/float64(f.Lockers)) / f.Mean
	}
	return f
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	for i := range r.shard {
		r.shard[i].h = hdrhistogram.New(minLatencyUS, maxLatencyUS, sigFigs)
	}
	return r
}

// Reset empties r for reuse.
func (r *Recorder) Reset() {
	for i := range r.shard {
		s := &r.shard[i]
		s.mu.Lock()
		s.h.Reset()
		s.mu.Unlock()
	}
	r.acquired.Store(0)
	r.notAcquired.Store(0)
	r.errs.Store(0)
	r.firstErr.Store(nil)
	for i := range r.perWorker {
		r.perWorker[i].Store(0)
	}
}

// Record records one finished cycle of locker worker that took d and ended
// with err (see Client).
func (r *Recorder) Record(worker int, d time.Duration, err error) {
	switch {
	case err == nil:
		r.acquired.Add(1)
		if worker < len(r.perWorker) {
			r.perWorker[worker].Add(1)
		}
	case errors.Is(err, ErrNotAcquired):
		r.notAcquired.Add(1)
	default:
		if r.errs.Add(1) == 1 {
			first := err // a copy: taking err's address would move it to the heap on every call
			r.firstErr.Store(&first)
		}
	}
	us := max(minLatencyUS, min(d.Microseconds(), maxLatencyUS))
	s := &r.shard[worker%shards]
	s.mu.Lock()
	_ = s.h.RecordValue(us)
	s.mu.Unlock()
}

// Counts returns the cycles recorded so far by outcome.
func (r *Recorder) Counts() (acquired, notAcquired, errs int64) {
	return r.acquired.Load(), r.notAcquired.Load(), r.errs.Load()
}

// FirstErr is the first failure recorded, or nil.
func (r *Recorder) FirstErr() error {
	if p := r.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Histogram merges the shards into one histogram of cycle latencies in
// microseconds.
func (r *Recorder) Histogram() *hdrhistogram.Histogram {
	h := hdrhistogram.New(minLatencyUS, maxLatencyUS, sigFigs)
	for i := range r.shard {
		s := &r.shard[i]
		s.mu.Lock()
		h.Merge(s.h)
		s.mu.Unlock()
	}
	return h
}

// Summary is what a run measured.
type Summary struct {
	Cycles      int64 // finished cycles: Acquired + NotAcquired + Errors
	Acquired    int64
	NotAcquired int64
	Errors      int64
	FirstErr    error
	Elapsed     time.Duration
	// Latencies of all finished cycles.
	P50, P90, P99, P999, Max, Mean time.Duration
}

// CyclesPerSec is finished cycles per second.
func (s Summary) CyclesPerSec() float64 { return perSec(s.Cycles, s.Elapsed) }

// AcquiredPerSec is successful cycles (the lock was held, then released)
// per second.
func (s Summary) AcquiredPerSec() float64 { return perSec(s.Acquired, s.Elapsed) }

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Summarize sums up what r recorded over elapsed.
func (r *Recorder) Summarize(elapsed time.Duration) Summary {
	h := r.Histogram()
	s := Summary{Elapsed: elapsed, FirstErr: r.FirstErr()}
	s.Acquired, s.NotAcquired, s.Errors = r.Counts()
	s.Cycles = s.Acquired + s.NotAcquired + s.Errors
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	if h.TotalCount() > 0 {
		s.P50, s.P90 = us(h.ValueAtQuantile(50)), us(h.ValueAtQuantile(90))
		s.P99, s.P999 = us(h.ValueAtQuantile(99)), us(h.ValueAtQuantile(99.9))
		s.Max, s.Mean = us(h.Max()), time.Duration(h.Mean()*float64(time.Microsecond))
	}
	return s
}

// Ms is d in milliseconds, for metrics and JSON.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
