package bench_test

import (
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
)

// BenchmarkRWMemory and BenchmarkRWRedis run the standard workloads with
// read-write locks, next to BenchmarkMemory and BenchmarkRedis (the mutex):
// read (every cycle RLock), write (every cycle WLock) and mixed (one cycle
// in four a write).
//
//	go test -run '^$' -bench RW -benchmem ./bench
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

func runRW(b *testing.B, l api.Locker) {
	for _, m := range []struct {
		name  string
		every int64
	}{{"read", 0}, {"write", 1}, {"mixed", 4}} {
		b.Run(m.name, func(b *testing.B) { benchtest.Run(b, "rw-"+m.name, bench.RW(l, m.every)) })
	}
}

// TestRW runs the read-write client on the embedded masters: fresh keys are
// never refused, and on shared keys readers and writers all finish.
func TestRW(t *testing.T) {
	e, err := engine.NewMemory(3)
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
