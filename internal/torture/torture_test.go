package torture

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.WorkerCommand = []string{"redlock", "torture-worker"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Duration = 0 }, "--duration"},
		{func(c *Config) { c.Engines = 0 }, "--engines 0"},
		{func(c *Config) { c.Clients = 257 }, "--clients 257"},
		{func(c *Config) { c.Keys = 0 }, "--keys 0"},
		{func(c *Config) { c.TTL = 10 * time.Millisecond }, "--ttl"},
		{func(c *Config) { c.MasterTimeout = c.TTL }, "--master-timeout"},
		{func(c *Config) { c.FaultInterval = 0 }, "--fault-interval"},
		{func(c *Config) { c.Work = c.TTL }, "--work"},
		{func(c *Config) { c.Schedule = "x" }, `--schedule "x"`},
		{func(c *Config) { c.Faults = []string{"kill", "nope"} }, `unknown fault "nope"`},
		{func(c *Config) { c.Faults = []string{"pause", "pause"} }, "listed twice"},
		{func(c *Config) { c.Schedule, c.Faults = SplitBrain, []string{Pause} }, "include kill"},
		{func(c *Config) { c.QuarantinePeriod = c.TTL / 2 }, "--quarantine"},
		{func(c *Config) { c.MaxListed = -1 }, "--max-listed -1"},
		{func(c *Config) { c.Unfenced = -0.1 }, "--unfenced -0.1"},
		{func(c *Config) { c.Unfenced = 2 }, "--unfenced 2"},
		{func(c *Config) { c.LongShare = 0.6 }, "--long-share 0.6"},
		{func(c *Config) { c.LongShare = -0.01 }, "--long-share -0.01"},
		{func(c *Config) { c.ClockDrift = -0.01 }, "--clock-drift -1%"},
		{func(c *Config) { c.ClockDrift = 20 }, "--clock-drift 2000%"},
	} {
		c := DefaultConfig()
		c.WorkerCommand = ok.WorkerCommand
		tc.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want it to mention %q", err, tc.want)
		}
	}
	c := DefaultConfig()
	c.Faults = nil // client-pause off: no worker command needed
	if err := c.Validate(); err != nil {
		t.Errorf("no faults: %v", err)
	}
	if c.period() != c.TTL {
		t.Errorf("default quarantine period %v, want the TTL", c.period())
	}
	c.QuarantinePeriod = 3 * time.Second
	if c.period() != 3*time.Second {
		t.Errorf("quarantine period %v", c.period())
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	c := DefaultConfig()
	c.Keys = 0
	if _, err := Run(context.Background(), c); err == nil {
		t.Fatal("Run with 0 keys succeeded")
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := DefaultConfig()
	c.WorkerCommand = []string{"redlock", "torture-worker"}
	if _, err := Run(ctx, c); err == nil {
		t.Fatal("Run with a cancelled context succeeded")
	}
}
