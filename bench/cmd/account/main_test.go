package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestRunAccountsForTheCommand: a command that spins is charged as the
// client, and the terms add up to the cores' time.
func TestRunAccountsForTheCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc only on Linux")
	}
	var out bytes.Buffer
	spin := `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`
	if err := run(&out, "", 1000, "spin", true, []string{"sh", "-c", spin}); err != nil {
		t.Fatal(err)
	}
	var a struct {
		Cycles   int64   `json:"cycles"`
		Client   float64 `json:"client_us"`
		Servers  float64 `json:"servers_us"`
		Measured float64 `json:"measured_us"`
		Total    float64 `json:"total_us"`
	}
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if a.Cycles != 1000 || a.Client <= 0 || a.Servers != 0 {
		t.Errorf("%+v: want 1000 cycles, the spinning shell's CPU as client, no servers", a)
	}
	// /proc/stat counts in 10ms ticks per core: allow a few of them.
	if d := a.Measured - a.Total; d > 40 || d < -40 {
		t.Errorf("measured %.1f us/cycle against cores x wall %.1f: the machine's time does not add up", a.Measured, a.Total)
	}
}

// TestRunRefusesBadInput: errors say what to fix.
func TestRunRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		cycles int64
		nodes  string
		args   []string
		want   string
	}{
		{0, "", []string{"true"}, "-cycles"},
		{10, "", nil, "no command"},
		{10, "10.1.2.3:6379", []string{"true"}, "not every server is local"},
		{10, "", []string{"false"}, "exit status 1"},
	} {
		err := run(&bytes.Buffer{}, c.nodes, c.cycles, "x", false, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(cycles %d, nodes %q, %q) = %v, want an error about %q", c.cycles, c.nodes, c.args, err, c.want)
		}
	}
}
