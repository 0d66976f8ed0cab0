// Command account runs a command and accounts for the whole machine's time
// while it ran, per cycle: the command's own CPU (it and the children it
// waits for), the local Redis servers' CPU, every other process's, idle and
// steal time, and the interrupt work among them (bench.Account). bench/run.sh
// runs the redis-benchmark ceiling under it, so that the ceiling and the
// engine (whose benchmarks report the same terms) can be set side by side.
//
//	account -nodes 127.0.0.1:7000,127.0.0.1:7001 -cycles 1000000 -- sh -c '...'
//
// It prints one line of figures in microseconds per cycle, or JSON with -json.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/quorumlock/redlock/bench"
)

func main() {
	nodes := flag.String("nodes", "", "comma-separated host:port of the local Redis servers whose CPU counts as the servers'")
	cycles := flag.Int64("cycles", 0, "how many cycles the command runs (> 0)")
	name := flag.String("name", "command", "a name for the output line")
	asJSON := flag.Bool("json", false, "print JSON")
	flag.Parse()
	if err := run(os.Stdout, *nodes, *cycles, *name, *asJSON, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "account:", err)
		os.Exit(2)
	}
}

func run(out io.Writer, nodes string, cycles int64, name string, asJSON bool, args []string) error {
	if cycles <= 0 {
		return errors.New("-cycles must be > 0: how many cycles the command runs")
	}
	if len(args) == 0 {
		return errors.New("no command given: account [flags] -- command args...")
	}
	var pids []int
	if nodes != "" {
		addrs := strings.Split(nodes, ",")
		if pids = bench.LocalPids(addrs); pids == nil {
			return fmt.Errorf("-nodes %s: not every server is local and answers INFO server", nodes)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	m0 := bench.ReadMachine(pids)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	wall := time.Since(start)
	m := bench.ReadMachine(pids).Sub(m0)
	if !m.Have || (pids != nil && !m.HaveProcs) {
		return errors.New("/proc/stat or a server's /proc/<pid>/stat could not be read")
	}
	// UserTime and SystemTime are the rusage's on Unix, and build everywhere.
	client := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	a := bench.AccountFor(m, client, wall, cycles)
	if asJSON {
		return json.NewEncoder(out).Encode(struct {
			Name   string  `json:"name"`
			Cycles int64   `json:"cycles"`
			WallS  float64 `json:"wall_s"`
			bench.Account
		}{name, cycles, wall.Seconds(), a})
	}
	_, err := fmt.Fprintf(out, "%s: %d cycles in %.2fs = %.0f cycles/s; us/cycle: client %.2f servers %.2f others %.2f idle %.2f steal %.2f (softirq %.2f included) = %.2f measured, cores x wall %.2f\n",
		name, cycles, wall.Seconds(), float64(cycles)/wall.Seconds(), a.Client, a.Servers, a.Others, a.Idle, a.Steal, a.SoftIRQ, a.Measured, a.Total)
	return err
}
