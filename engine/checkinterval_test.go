package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
)

// infoCounter counts the reads of a master's server info: how often the
// engine checks the master's run id, uptime and evictions.
type infoCounter struct {
	transport.Transport
	r     transport.ServerReporter
	reads atomic.Int64
}

func (c *infoCounter) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	c.reads.Add(1)
	return c.r.ServerInfo(ctx)
}

func (c *infoCounter) Epoch() uint64 { return c.r.Epoch() }

// WithCheckInterval sets how often each master is read, with the
// quarantine on or off: the reads are what bounds how long a master that
// evicted keys keeps voting (README, "Masters that drop keys while they
// run"), so a user who wants that window narrower than the default 1s
// must be able to say so. Counted over 20 intervals of the bubble's clock.
func TestCheckInterval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []api.Option
		every time.Duration
	}{
		{"default", nil, time.Second},
		{"250ms", []api.Option{api.WithCheckInterval(250 * time.Millisecond)}, 250 * time.Millisecond},
		{"3s, quarantine off", []api.Option{api.WithCheckInterval(3 * time.Second), api.WithoutRestartQuarantine()}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, ts := memoryMasters(3)
				cs := make([]*infoCounter, len(ts))
				for i, tr := range ts {
					cs[i] = &infoCounter{Transport: tr, r: tr.(transport.ServerReporter)}
					ts[i] = cs[i]
				}
				e, err := engine.NewWithTransports(ts, append([]api.Option{quiet}, tc.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				closeAtEnd(t, e)
				if got := e.Options().Quarantine.CheckInterval; got != tc.every {
					t.Errorf("Options().Quarantine.CheckInterval = %v, want %v", got, tc.every)
				}
				time.Sleep(time.Millisecond) // the reads at the start
				synctest.Wait()
				before := make([]int64, len(cs))
				for i, c := range cs {
					before[i] = c.reads.Load()
				}
				const n = 20
				time.Sleep(n * tc.every)
				synctest.Wait()
				for i, c := range cs {
					if got := c.reads.Load() - before[i]; got < n-1 || got > n+1 {
						t.Errorf("master %d was read %d times in %v, want %d (every %v)", i, got, n*tc.every, n, tc.every)
					}
				}
			})
		})
	}
}

// A check interval that is not positive, or under a millisecond (a node
// that reads INFO without pause), is refused with what to fix.
func TestCheckIntervalInvalid(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		_, err := engine.NewMemory(3, api.WithCheckInterval(d))
		if !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("WithCheckInterval(%v): %v, want ErrInvalidArgument", d, err)
		}
	}
}
