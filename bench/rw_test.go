package bench_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
)

// BenchmarkRWMemory and BenchmarkRWRedis run the standard workloads with
// read-write locks, next to BenchmarkMemory and BenchmarkRedis (the mutex):
// read (every cycle RLock), write (every cycle WLock) and mixed (one cycle
// in four a write). Side by side with the mutex, on two workloads:
//
//	go test -run '^$' -bench '^Benchmark(RW)?Memory$/^(uncontended|contended)$/^c=(64|256)$' -benchmem ./bench
func BenchmarkRWMemory(b *testing.B) {
	e, err := engine.NewMemory(5)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	runRW(b, e)
}

func BenchmarkRWRedis(b *testing.B) {
	e, err := engine.New(benchtest.RedisNodes(b), api.WithoutRestartQuarantine())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	runRW(b, e)
}

// runRW runs the standard workloads (benchtest.Run's) with each mix, named
// "<workload>/<mix>" (uncontended/c=256/read, ...) so that one -bench
// pattern selects the same workloads of the mutex and of the read-write lock.
func runRW(b *testing.B, l api.Locker) {
	mixes := []struct {
		name  string
		every int64
	}{{"read", 0}, {"write", 1}, {"mixed", 4}}
	prefix := bench.RunPrefix("rw")
	if err := bench.WaitReady(context.Background(), bench.RW(l, 0), prefix+"ready:", 10*time.Second, nil); err != nil {
		b.Fatalf("no read lock could be taken in 10s: %v", err)
	}
	for _, contended := range []bool{false, true} {
		for _, c := range benchtest.Concurrencies {
			p := prefix + strconv.FormatBool(contended) + strconv.Itoa(c) + ":"
			w := bench.Uncontended(c, p)
			if contended {
				w = bench.Contended(c, p)
			}
			for _, m := range mixes {
				b.Run(w.Name()+"/"+m.name, func(b *testing.B) { benchtest.RunWorkload(b, bench.RW(l, m.every), w) })
			}
		}
	}
}

// TestRW runs the read-write client on the embedded masters: fresh keys are
// never refused, and on shared keys readers and writers all finish.
func TestRW(t *testing.T) {
	// A master timeout far above a loaded machine's stalls: the test is
	// about the client, not about timeouts.
	e, err := engine.NewMemory(3, api.WithMasterTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, w := range []bench.Workload{bench.Uncontended(8, bench.RunPrefix("rw-u")), bench.Contended(8, bench.RunPrefix("rw-c"))} {
		rec := bench.NewRecorder()
		bench.Run(t.Context(), bench.RW(e, 4), w, 400, rec)
		acquired, notAcquired, errs := rec.Counts()
		if errs != 0 || acquired+notAcquired != 400 || (w.Keys == 0 && notAcquired != 0) || (w.Keys > 0 && acquired != 400) {
			t.Errorf("%s: acquired %d, not acquired %d, errors %d (first %v)", w.Name(), acquired, notAcquired, errs, rec.FirstErr())
		}
	}
}
