// Package redsyncbench runs the engine's benchmark workloads (package
// github.com/quorumlock/redlock/bench) on go-redsync/redsync v4 with go-redis
// v9 pools: the reference Go Redlock client, for comparison.
//
// It is a module of its own so that redsync and go-redis never enter the
// engine's dependency list; `go test ./...` at the repository root does not
// descend into it. bench/run.sh runs it against the same masters as the
// engine's benchmarks:
//
//	cd bench/redsync && REDLOCK_BENCH_NODES=127.0.0.1:7001,... go test -run '^$' -bench . -benchmem
//
// Without REDLOCK_BENCH_NODES it starts five redis-server processes itself.
package redsyncbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
)

// poolSizeEnv overrides go-redis's pool size per master (default
// 10*GOMAXPROCS).
const poolSizeEnv = "REDSYNC_POOL_SIZE"

// BenchmarkRedis has the same name, sub-benchmarks and metrics as the
// engine's BenchmarkRedis in package bench, so that benchstat shows them
// side by side.
func BenchmarkRedis(b *testing.B) {
	rs, closeAll := newRedsync(b)
	defer closeAll()
	benchtest.Run(b, "redsync", newClient(rs))
}

// BenchmarkContention is the engine's BenchmarkContention (lockers on one
// key, with fairness) on redsync, with the same names and metrics.
func BenchmarkContention(b *testing.B) {
	rs, closeAll := newRedsync(b)
	defer closeAll()
	benchtest.RunContention(b, "redsync", newClient(rs), benchtest.MaxContention())
}

// newRedsync makes redsync over go-redis pools to the benchmark's masters.
func newRedsync(b *testing.B) (*redsync.Redsync, func()) {
	nodes := benchtest.RedisNodes(b)
	poolSize := 0 // go-redis's default
	if s := os.Getenv(poolSizeEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", poolSizeEnv, s)
		}
		poolSize = n
	}
	pools := make([]redsyncredis.Pool, len(nodes))
	clients := make([]*goredislib.Client, len(nodes))
	for i, addr := range nodes {
		clients[i] = goredislib.NewClient(&goredislib.Options{Addr: addr, PoolSize: poolSize})
		pools[i] = goredis.NewPool(clients[i])
	}
	return redsync.New(pools...), func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

// client adapts redsync to bench.Client with the engine's settings: a 10s
// TTL, one attempt for TryLock, and for Lock the engine's default retry shape
// (5ms doubling to 250ms, ±50%) without a limit on attempts, so that both
// clients wait for a contended key the same way. (redsync's own default is
// 32 attempts 50-250ms apart.)
type client struct {
	rs   *redsync.Redsync
	try  []redsync.Option
	wait []redsync.Option
}

func newClient(rs *redsync.Redsync) *client {
	ttl := redsync.WithExpiry(10 * time.Second)
	return &client{
		rs:   rs,
		try:  []redsync.Option{ttl, redsync.WithTries(1)},
		wait: []redsync.Option{ttl, redsync.WithTries(math.MaxInt32), redsync.WithRetryDelayFunc(backoff)},
	}
}

// backoff is the engine's default retry delay before attempt tries+1.
func backoff(tries int) time.Duration {
	d := 250 * time.Millisecond
	if tries < 7 {
		d = min(d, 5*time.Millisecond<<(tries-1))
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

func (c *client) Cycle(ctx context.Context, key string, wait bool) error {
	var (
		m   *redsync.Mutex
		err error
	)
	if wait {
		m = c.rs.NewMutex(key, c.wait...)
		err = m.LockContext(ctx)
	} else {
		m = c.rs.NewMutex(key, c.try...)
		err = m.TryLockContext(ctx)
	}
	if err != nil {
		if notAcquired(err) {
			return fmt.Errorf("%w: %w", bench.ErrNotAcquired, err)
		}
		return err
	}
	if ok, err := m.UnlockContext(ctx); !ok {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// notAcquired tells "taken" from a failure in redsync's errors: ErrTaken
// (a majority held the key), ErrFailed (attempts used up), or per-node
// "taken" without any node failing.
func notAcquired(err error) bool {
	var taken *redsync.ErrTaken
	var rerr *redsync.RedisError
	var nodeTaken *redsync.ErrNodeTaken
	switch {
	case errors.As(err, &taken), errors.Is(err, redsync.ErrFailed):
		return true
	case errors.As(err, &rerr):
		return false
	}
	return errors.As(err, &nodeTaken)
}
