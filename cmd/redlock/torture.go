package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/torture"
)

func init() {
	register(newTortureCmd)
	register(newTortureWorkerCmd)
}

// newTortureWorkerCmd is the worker process of the client-pause fault: the
// torture starts it (with this same binary) and talks to it over stdin and
// stdout. Hidden: it is no command for people.
func newTortureWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "torture-worker",
		Short:              "One engine in a process of its own, for torture's client-pause fault",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			code := torture.WorkerMain(cmd.Context(), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}

func newTortureCmd() *cobra.Command {
	cfg := torture.DefaultConfig()
	var (
		faults       string
		clockDrift   string
		noQuarantine bool
		noFencing    bool
		asJSON       bool
		engineLog    string
		workloads    string
		metricsAddr  string
	)
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Run the engine on five real Redis masters under faults and check every lock it granted",
		Long: `torture starts five redis-server masters on free loopback ports (no
persistence; redis-server must be on PATH), runs --engines independent engines
with --clients clients each over --keys keys, and injects faults while the
clients loop Lock (fencing on, but for an --unfenced share) -> critical
section -> Unlock. It records every grant and critical section and checks, at
the end, that:

  - no two holders of a key ran their critical sections at once while the
    engine vouched for both (overlap), nor held overlapping grants
    (grant-overlap);
  - fencing tokens of a key strictly increase in grant order (token-order),
    except across moments the schedule knowingly left fewer than a majority
    of masters with their counters (fence resets);
  - no holder ran past its validity without the lost-lock signal (overrun).
    An overrun whose holder's own timer, due within the validity, woke it
    late by at least as much, or (for a section planned past its validity)
    whose process's 2ms probe timer, due by the validity's end, had not run
    until the holder's timer was due, is the process starved of CPU, a
    paused process: it is counted apart (starved_overruns), not a violation.
  - no lock key is left on a master (key-left): after the faults, the run
    heals, settles (every key the faults may have left expires), runs the
    clients fault-free for --tail, lets them Unlock, closes every engine and
    scans every master; fencing counters are kept on purpose.

Faults (--faults, a comma-separated subset, or "none"):
  kill       kill -9 one, two or a majority of masters and restart them EMPTY
             on the same port at once (half the time right after a client
             began a long critical section)
  pause      SIGSTOP a master for up to 1.5 TTLs, then SIGCONT
  latency    slow one master, or one engine's link to it
  partition  cut a master (or a link) off, or lose its replies while its
             ops still apply
  proxy      through a TCP proxy per link: RST resets, cuts that hold bytes
             and deliver them late, delays
  script-flush  storms of SCRIPT FLUSH on one master, a majority or all:
             batches meet NOSCRIPT and are resent
  address-flip  the address of one, two or a majority of masters reaches a
             spare, long-running, empty redis-server for 1-3 TTLs (through
             the TCP proxies, which reset their connections); a majority
             flip comes right after a client began a long critical section
  fence-loss fencing write-backs lost on two masters while one engine's
             links to them are slow
  clock-drift   one master, a majority or all run a clock --clock-drift
             fast (the TTLs that reach them are divided by 1+drift)
  client-pause
             two more engines, each in a worker process of its own, whose
             clients write to a protected resource (a separate redis-server
             that, with fencing, refuses a token below the largest it has
             accepted) under their locks; a worker is stopped (SIGSTOP)
             right after a client checked its lock and before it writes,
             for more than a TTL, then resumed: the GC pause. Checked: no
             write accepted with a stale token (stale-write), no earlier
             holder's write accepted after a later holder's (late-write)

--unfenced is the share of Lock calls made without fencing (the plain SET
path). --clock-drift is how fast a drifting master's clock runs; the engine
allows for 1% of the TTL plus 2ms, so the default 0.5% must never break
anything, while far past it (--faults clock-drift --clock-drift 30%) the
checker must report overlaps: a negative control.

--schedule split-brain only kills, a majority each time, right after a long
critical section began. With --no-quarantine that hands the lock to a second
holder while the first still holds it: the negative control, which must end
with exit status 1. --no-fencing --faults client-pause is the other negative
control: without tokens the resource takes the paused holder's late write on
top of the next holder's, and late-write must report it (exit status 1).

--cluster-shards K makes each master a Redis Cluster of K shards, with every
fault above (kill and pause hit a shard; proxy hits the proxy in front of a
shard, which the shard announces as its address; address-flip points a
shard's proxy at a spare server; script-flush storms every shard) plus
reshard: a lock key's slot moves to another shard while clients contend.

The masters are stopped by pid on every exit path. Exit status: 0 when no
violation was found, 1 when one was, 2 on a usage or setup error (no
redis-server), 130 when interrupted.`,
		Example: `  # one minute, every fault
  redlock torture

  # ten minutes, another seed, as one JSON object
  redlock torture --duration 10m --seed 7 --json

  # the negative control: without the restart quarantine the checker must bite
  redlock torture --no-quarantine --schedule split-brain --duration 20s

  # the clock negative control: masters 30% fast, far past the allowance
  redlock torture --faults clock-drift --clock-drift 30% --duration 20s

  # five Redis Clusters of three shards as the masters, with reshards and
  # shard restarts
  redlock torture --cluster-shards 3 --duration 5m`,
		Args: flagsOnly("torture"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Faults = splitFaults(faults)
			cfg.Workloads = splitFaults(workloads)
			if cfg.ClusterShards > 0 && !cmd.Flags().Changed("faults") {
				cfg.Faults = slices.Clone(torture.ClusterKinds)
			}
			cfg.Quarantine = !noQuarantine
			d, err := parseRate(clockDrift)
			if err != nil {
				return usageErr(fmt.Errorf("--clock-drift %q: %w", clockDrift, err))
			}
			cfg.ClockDrift = d
			cfg.NoFencing = noFencing
			if exe, err := os.Executable(); err == nil {
				cfg.WorkerCommand = []string{exe, "torture-worker"}
			}
			if err := cfg.Validate(); err != nil {
				return usageErr(err)
			}
			cfg.Progress = cmd.ErrOrStderr()
			if metricsAddr != "" {
				stop, err := serveMetrics(metricsAddr, cmd.ErrOrStderr())
				if err != nil {
					return usageErr(err)
				}
				defer stop()
			}
			if engineLog != "" {
				f, err := os.Create(engineLog)
				if err != nil {
					return usageErr(fmt.Errorf("--engine-log: %w", err))
				}
				defer f.Close()
				cfg.EngineLog = f
			}
			return runTorture(cmd.Context(), cmd.OutOrStdout(), cfg, asJSON)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the clients run (after the fresh masters' first quarantine)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the fault schedule and the clients' choices")
	f.IntVar(&cfg.Engines, "engines", cfg.Engines, "independent engines, each with its own connections")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "clients per engine")
	f.IntVar(&cfg.Keys, "keys", cfg.Keys, "lock keys the clients share")
	f.StringVar(&workloads, "workloads", strings.Join(cfg.Workloads, ","), "what the clients do, dealt to them in turn: a comma-separated list of mutex, semaphore, rw")
	f.StringVar(&faults, "faults", strings.Join(torture.Kinds, ","), `faults to inject: a comma-separated subset of `+strings.Join(torture.Kinds, ",")+`, or "none"`)
	f.StringVar(&cfg.Schedule, "schedule", cfg.Schedule, "fault schedule: mixed, or split-brain (majority kills timed to live locks)")
	f.BoolVar(&noQuarantine, "no-quarantine", false, "build the engines without the restart quarantine (to show the failure it prevents)")
	f.BoolVar(&noFencing, "no-fencing", false, "lock without fencing tokens; the client-pause resource accepts every write (to show the failure fencing prevents)")
	f.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "lock time to live")
	f.DurationVar(&cfg.QuarantinePeriod, "quarantine", 0, "restart quarantine period (default: the ttl)")
	f.DurationVar(&cfg.MasterTimeout, "master-timeout", cfg.MasterTimeout, "bound on one master's answer")
	f.DurationVar(&cfg.FaultInterval, "fault-interval", cfg.FaultInterval, "mean time between two faults")
	f.DurationVar(&cfg.Work, "work", cfg.Work, "longest short critical section")
	f.Float64Var(&cfg.Unfenced, "unfenced", cfg.Unfenced, "share of Lock calls without fencing (0 to 1)")
	f.Float64Var(&cfg.LongShare, "long-share", 0.004, "share of Lock calls whose holder keeps the lock for 0.3-0.8 of the ttl (up to 0.5; 0 means 0.004)")
	f.StringVar(&clockDrift, "clock-drift", strconv.FormatFloat(100*cfg.ClockDrift, 'g', -1, 64)+"%", `how fast clock-drift faults make a master's clock run: "0.5%" or 0.005`)
	f.DurationVar(&cfg.ProgressEvery, "progress", cfg.ProgressEvery, "print progress to stderr this often (0: never)")
	f.IntVar(&cfg.MaxListed, "max-listed", cfg.MaxListed, "violations listed in the report (all are counted)")
	f.DurationVar(&cfg.Tail, "tail", 0, "how long the clients run fault-free before the end-of-run key check (default: the ttl + 2s)")
	f.IntVar(&cfg.ClusterShards, "cluster-shards", 0, "make each master a Redis Cluster of this many shards, with the faults "+strings.Join(torture.ClusterKinds, ",")+" (reshard: a lock key's slot moves to another shard while clients contend)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of the report")
	f.StringVar(&engineLog, "engine-log", "", "write the engines' warnings (restarts seen, quarantines) to this file")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve the in-process engines' metrics for Prometheus at http://HOST:PORT/metrics while it runs (OBSERVABILITY.md)")
	f.SortFlags = false
	return cmd
}

// parseRate parses a rate as a percentage ("0.5%") or a fraction (0.005).
func parseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	scale := 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s, scale = strings.TrimSpace(t), 0.01
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New(`want a percentage such as "0.5%" or a fraction such as 0.005`)
	}
	return x * scale, nil
}

// splitFaults parses --faults; "none" and "" mean no faults.
func splitFaults(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return []string{}
	}
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// runTorture runs one torture and writes its report; it returns nil or an
// *exitError.
func runTorture(ctx context.Context, w io.Writer, cfg torture.Config, asJSON bool) error {
	rep, err := torture.Run(ctx, cfg)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	case errors.Is(err, torture.ErrSetup):
		return &exitError{code: exitUsage, err: err}
	default:
		return &exitError{code: exitFailure, err: err}
	}
	if asJSON {
		if err := json.NewEncoder(w).Encode(rep); err != nil {
			return &exitError{code: exitFailure, err: err}
		}
	} else {
		printTorture(w, rep)
	}
	if n := rep.Violations.Count; n > 0 {
		return &exitError{code: exitFailure, err: fmt.Errorf("%d safety violations found (%s)", n, kv(intMap(rep.Violations.ByKind)))}
	}
	return nil
}

func intMap(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

// kv formats a map as "a 1, b 2" in key order ("none" when empty).
func kv(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+num(m[k]))
	}
	return strings.Join(parts, ", ")
}

func printTorture(w io.Writer, r *torture.Report) {
	ttl := time.Duration(r.TTLMS * float64(time.Millisecond))
	q := fmt.Sprintf("on (period %v)", time.Duration(r.QuarantineMS*float64(time.Millisecond)))
	if !r.Quarantine {
		q = "OFF"
	}
	masters := "redis-server masters"
	if r.ClusterShards > 0 {
		masters = fmt.Sprintf("Redis Cluster masters of %d shards", r.ClusterShards)
	}
	fmt.Fprintf(w, "redlock torture: %d %s (quorum %d), %d engines × %d clients, %d keys, ttl %v, restart quarantine %s\n",
		r.Masters, masters, r.Quorum, r.Engines, r.Clients, r.Keys, ttl, q)
	fmt.Fprintf(w, "seed %d, schedule %s, %.1fs\n\n", r.Seed, r.Schedule, r.DurationS)
	// Faults in the order of the kinds, then the breakdown.
	var faults []string
	for _, k := range append(slices.Clone(torture.Kinds), torture.Reshard) {
		if n, ok := r.Faults[k]; ok {
			faults = append(faults, k+" "+num(n))
		}
	}
	if len(faults) == 0 {
		faults = []string{"none"}
	}
	rows := [][2]string{
		{"grants", fmt.Sprintf("%s (%s/s), %s critical sections", num(r.Grants), num(int64(r.GrantsPerSec)), num(r.Sections))},
		{"workloads", strings.Join(r.Workloads, ", ")},
		{"held", kv(r.Held)},
		{"faults", strings.Join(faults, ", ")},
		{"fault detail", kv(r.FaultDetail)},
		{"lock errors", kv(r.LockErrors)},
		{"unlock errors", kv(r.UnlockErrors)},
		{"fence resets", num(int64(r.Resets))},
		{"violations", num(int64(r.Violations.Count))},
	}
	if k := r.KeysLeft; k != nil {
		rows = slices.Insert(rows, len(rows)-1, [2]string{"keys left", keysLeftRow(k)})
	}
	if p := r.ClientPause; p != nil {
		fencing := "fencing on"
		if !p.Fencing {
			fencing = "fencing OFF"
		}
		rows = append(rows[:len(rows)-1], [2]string{"client pause", fmt.Sprintf(
			"%s, %d worker processes × %d clients; %d pauses, %d past validity, %d with a newer write first: stale writes refused %d, accepted %d",
			fencing, p.Workers, p.ClientsPerWorker, p.Pauses, p.PastValidity, p.NewerFirst, p.StaleRefused, p.StaleAccepted)},
			[2]string{"writes", fmt.Sprintf("accepted %s, refused %s, errors %s, unreported %s",
				num(p.WritesAccepted), num(p.WritesRefused), num(p.WriteErrors), num(p.Unreported))},
			rows[len(rows)-1])
	}
	if n := r.Starved.Count; n > 0 {
		rows = append(rows, [2]string{"starved", fmt.Sprintf("%s overruns of a process starved across the validity's end, by its own timer or the probe (not violations; listed below)", num(int64(n)))})
	}
	for _, row := range rows {
		fmt.Fprintf(w, "  %-14s %s\n", row[0], row[1])
	}
	defer printStarved(w, r)
	if r.Violations.Count == 0 {
		extra := ""
		if slices.Contains(r.Workloads, torture.WorkloadSemaphore) {
			extra += ", no semaphore had more holders than permits"
		}
		if slices.Contains(r.Workloads, torture.WorkloadRW) {
			extra += ", no writer overlapped another holder"
		}
		if r.KeysLeft != nil && r.KeysLeft.Skipped == "" {
			extra += ", no lock key left on a master after the fault-free tail"
		}
		fmt.Fprintf(w, "\nno violation: every grant was exclusive within its validity, tokens increased, no holder overran its validity unsignalled%s\n", extra)
		return
	}
	fmt.Fprintf(w, "\nVIOLATIONS (%s; %d listed):\n", kv(intMap(r.Violations.ByKind)), len(r.Violations.List))
	for _, v := range r.Violations.List {
		fmt.Fprintf(w, "  %s\n", v)
		if v.A == nil {
			continue // key-left: the detail says it all
		}
		grants := []*history.Grant{v.A}
		if v.B != nil {
			grants = append(grants, v.B)
		}
		for i, g := range grants {
			fmt.Fprintf(w, "    %c: %s token %d granted %.3fms valid until %.3fms", 'A'+i, g.Holder, g.Token,
				float64(g.GrantedAt)/1e6, float64(g.ValidUntil)/1e6)
			if g.Ran {
				fmt.Fprintf(w, ", ran [%.3fms, %.3fms] signaled=%v", float64(g.Start)/1e6, float64(g.End)/1e6, g.Signaled)
			}
			if g.Released {
				fmt.Fprintf(w, ", unlocked at %.3fms", float64(g.ReleasedAt)/1e6)
			}
			fmt.Fprintln(w)
		}
	}
}

// keysLeftRow is the end-of-run key check's line of the report.
func keysLeftRow(k *torture.KeysReport) string {
	if k.Skipped != "" {
		return "not checked: " + k.Skipped
	}
	return fmt.Sprintf("%d lock keys on %d servers after a %.1fs fault-free tail (%s grants, settled %.1fs after the last fault), its Unlocks and Close (scanned %.0fms after the tail); %d fencing counters kept",
		k.Left, k.Servers, k.TailS, num(k.TailGrants), k.SettleS, 1000*k.ScanAfterS, k.Fences)
}
