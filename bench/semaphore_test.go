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

// BenchmarkSemaphoreMemory and BenchmarkSemaphoreRedis put semaphore
// cycles (a permit taken and released) next to mutex cycles on the same
// engine, for a few of the standard workloads:
//
//	go test -run '^$' -bench Semaphore -benchmem ./bench
//
// mutex is Lock/TryLock; sem-P=1 a semaphore of one permit (its only slot
// is one child acquire, like the mutex, through the any-of path); sem-P=4
// four permits, whose first window tries two slots at once and releases the
// one it does not keep.
func BenchmarkSemaphoreMemory(b *testing.B) {
	e, err := engine.NewMemory(5)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	semaphoreBench(b, "memory", e)
}

func BenchmarkSemaphoreRedis(b *testing.B) {
	e, err := engine.New(benchtest.RedisNodes(b), api.WithoutRestartQuarantine())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	semaphoreBench(b, "engine", e)
}

func semaphoreBench(b *testing.B, name string, e *engine.Engine) {
	clients := []struct {
		name string
		c    bench.Client
	}{
		{"mutex", bench.Engine(e)},
		{"sem-P=1", bench.Semaphore(e, 1)},
		{"sem-P=4", bench.Semaphore(e, 4)},
	}
	prefix := bench.RunPrefix(name)
	for _, cl := range clients {
		if err := bench.WaitReady(context.Background(), cl.c, prefix+cl.name, 10*time.Second, nil); err != nil {
			b.Fatalf("%s: nothing could be taken in 10s: %v", cl.name, err)
		}
	}
	for _, cl := range clients {
		for _, c := range []int{1, 64, 256} {
			p := prefix + cl.name + ":" + strconv.Itoa(c)
			for _, w := range []bench.Workload{bench.Uncontended(c, p+"u:"), bench.Contended(c, p+"c:")} {
				b.Run(cl.name+"/"+w.Name(), func(b *testing.B) { benchtest.RunWorkload(b, cl.c, w) })
			}
		}
	}
}
