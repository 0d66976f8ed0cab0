//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/check"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

func init() { register(newRunCmd) }

// Exit statuses of run besides the command's own (which it passes through,
// 128+n for a command killed by signal n).
const (
	exitNotAcquired = 75  // the lock is taken: another owner holds it (EX_TEMPFAIL)
	exitLost        = 76  // the lock was lost while the command ran; the command was stopped
	exitUnreachable = 77  // too few masters could vote (down, slow, in restart quarantine, refusing, unsafe)
	exitCannotExec  = 126 // the command was found but could not be started (as in sh)
	exitNotFound    = 127 // the command was not found (as in sh)
)

// Environment variables the command gets.
const (
	envKey   = "REDLOCK_KEY"
	envValue = "REDLOCK_VALUE"
	envToken = "REDLOCK_TOKEN"
)

// runOptions configures one run; see the flags for what each means.
type runOptions struct {
	Key        string
	Nodes      []string
	TTL        time.Duration
	Wait       time.Duration
	Grace      time.Duration
	Fencing    bool
	Quarantine time.Duration // used when QuarantineSet; 0 switches it off
	// QuarantineSet: --quarantine was given. Otherwise the engine's default
	// applies: a quarantine of one TTL.
	QuarantineSet bool
	// Shared takes a read lock on Key (RLock) instead of the lock.
	Shared  bool
	Command []string
	// Permits > 0 takes a permit of the semaphore Key instead of the lock.
	Permits int

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	watch          *waitWatch // says what the wait is for when it passes a second
}

func defaultRunOptions() runOptions {
	return runOptions{TTL: 10 * time.Second, Wait: 30 * time.Second, Grace: 5 * time.Second}
}

func newRunCmd() *cobra.Command {
	o := defaultRunOptions()
	var nodes string
	cmd := &cobra.Command{
		Use:   "run --key KEY [flags] [--] COMMAND [ARGS...]",
		Short: "Run a command while holding a lock, like flock(1) across machines",
		Long: `run takes the lock --key on the Redis masters (--nodes or ` + nodesEnv + `),
runs COMMAND with its standard input, output and error, and releases the lock
when the command exits. While the command runs the lock is extended, for as
long as the command runs (how often: below).

It waits up to --wait for the lock (--wait 0: one attempt), once it has
connected to the masters, which is not part of --wait: a moment once a quorum
has answered, even with other masters hanging (their connections open,
nothing answering), and up to two seconds while fewer than a quorum answer. If the lock is lost
while the command runs (a majority of masters refused it, say), run sends the
command SIGTERM, then SIGKILL after --grace, and exits with status 76. The
command never outlives the lock: if no extension has been confirmed when only
--grace of the lock's validity is left (masters that stopped answering), run
sends SIGTERM then, and SIGKILL when the validity ends, --grace or not. So
--grace is at most half the --ttl (default 5s, or half the --ttl if that is
less), and the lock is extended more often the longer the grace: each time
(ttl - grace) / (2 ttl) of its validity has passed, half of it with no grace.
SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to run are passed on to the command;
the lock is released once the command has exited.

The command runs in its own process group, and every signal run sends it goes
to that whole group, so a lost lock also stops what the command started.
Unlike flock(1), whose lock stays with the open file that background children
inherit, the lock is released when the command itself exits: a command that
leaves work running in the background must wait for it. If run itself is
killed with SIGKILL, the command gets SIGKILL too (Linux), but processes the
command started do not, and they may outlive the lock. When
run is the foreground job of a terminal, the command stays in run's process
group instead, so that it can read the terminal: Ctrl-C and the like then reach
it from the terminal directly, run passes on only SIGTERM, and a lost lock
signals the command itself but not its children.

With --shared, run takes a read lock on --key instead: any number of commands
with --shared run at once, and none while a command without it holds the key
(one without --shared is a writer; it does not hold new readers back, so a
steady stream of --shared runs can delay it). The read lock is
extended, lost and released like the lock, with the same exit statuses (75:
a writer holds the key). --fencing does not apply.

With --permits N, run takes one of N permits of the semaphore --key instead:
at most N copies of the command run at once across every host (each copy must
give the same N). The permit is a lock on one of the semaphore's N slot keys;
it is extended, lost and released like the lock, and exit statuses are the
same (75: every permit is held). --shared and --permits do not go together.

The command's environment has ` + envKey + ` (the key; with --permits, the
slot key of the permit), ` + envValue + ` (the
lock's unique value) and ` + envToken + ` (the fencing token, a positive integer
growing with every grant of the key, with --fencing; empty without it).

Masters restarted less than --quarantine ago (default: the --ttl) do not vote:
without persistence they forgot the locks they held. --quarantine 0 turns that
off; do that only for masters that keep their data across restarts (appendfsync
always), or two owners can hold the lock after a restart.

Exit status:
  the command's    its own status, or 128+n when it was killed by signal n
  75               not acquired: the lock is taken (another owner holds it)
  76               the lock was lost while the command ran; it was stopped
  77               not acquired: too few masters could vote (down, slow, in
                   restart quarantine, refusing the commands, or unsafe)
  126, 127         the command could not be started, or was not found
  128+n            interrupted by signal n while waiting for the lock
  2                usage or setup error (a bad flag or value, a bad address)
A command that itself exits with 75, 76 or 77 looks the same to the caller;
run also says on stderr why it gave up.`,
		Example: `  # one nightly backup at a time across all hosts; skip when it is running
  export ` + nodesEnv + `=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379,10.0.0.4:6379,10.0.0.5:6379
  redlock run --key nightly-backup --wait 0 -- /usr/local/bin/backup.sh
  [ $? -eq 75 ] && echo "another host is running the backup"

  # wait up to 10 minutes for the deploy lock; fencing token for the deploy tool
  redlock run --key deploy:prod --wait 10m --fencing -- sh -c 'deploy --fence "$` + envToken + `"'

  # many readers of the catalog at once, never during the migration
  redlock run --key catalog --shared -- ./export-catalog.sh
  redlock run --key catalog -- ./migrate-catalog.sh
  # at most 4 report builders at once across the fleet; wait up to an hour
  redlock run --key report-builders --permits 4 --wait 1h -- ./build-report.sh

  # a 60s TTL, and 20s for the command to stop if the lock is lost
  redlock run --key migrate --ttl 60s --grace 20s --nodes redis://:secret@r1:6379,r2:6379,r3:6379 -- ./migrate up`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no command: give the command to run after --, as in redlock run --key K -- ./job.sh")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			o.Command = args
			o.QuarantineSet = fl.Changed("quarantine")
			if !fl.Changed("grace") {
				o.Grace = min(o.Grace, o.TTL/2)
			}
			o.Nodes = masters(cmd, nodes)
			if err := o.validate(); err != nil {
				return usageErr(err)
			}
			o.Stdin, o.Stdout, o.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runCommand(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	// The first argument that is not a flag starts the command, so that
	// "redlock run --key K ls -l" needs no "--".
	f.SetInterspersed(false)
	f.StringVar(&o.Key, "key", "", "name of the lock (required)")
	f.StringVar(&nodes, "nodes", "", "comma-separated Redis masters ("+nodesForms+"); default $"+nodesEnv+" (required: one or the other)")
	f.DurationVar(&o.TTL, "ttl", o.TTL, "lock time to live; the lock is extended while the command runs")
	f.DurationVar(&o.Wait, "wait", o.Wait, "how long to wait for the lock; 0 makes one attempt")
	f.BoolVar(&o.Fencing, "fencing", false, "give the command a fencing token in $"+envToken)
	f.DurationVar(&o.Grace, "grace", o.Grace, "after a lost lock, time between SIGTERM and SIGKILL to the command; at most half the --ttl (default: 5s, or half the --ttl if less)")
	f.BoolVar(&o.Shared, "shared", false, "take a read lock: commands with --shared run together, never with one without it (a writer)")
	f.IntVar(&o.Permits, "permits", 0, "take one of N permits of the semaphore --key instead of the lock: at most N copies of the command run at once fleet-wide (every copy must give the same N)")
	f.DurationVar(&o.Quarantine, "quarantine", 0, "restart quarantine: masters up for less do not vote (default: the --ttl); 0 turns it off, which is unsafe for masters without persistence")
	f.SortFlags = false
	return cmd
}

func (o *runOptions) validate() error {
	switch {
	case o.Key == "":
		return errors.New("--key is required: name the lock, as in --key nightly-backup")
	case len(o.Nodes) == 0:
		return errors.New("no masters: give --nodes or set " + nodesEnv + " (run needs Redis masters shared by every process that takes the lock)")
	case o.Wait < 0:
		return fmt.Errorf("--wait %v: want 0 (one attempt) or more", o.Wait)
	case o.Grace < 0:
		return fmt.Errorf("--grace %v: want 0 (SIGKILL at once) or more", o.Grace)
	case o.QuarantineSet && o.Quarantine < 0:
		return fmt.Errorf("--quarantine %v: want 0 (off) or more", o.Quarantine)
	}
	if err := check.Key(o.Key); err != nil {
		return fmt.Errorf("--key: %s", strings.TrimPrefix(err.Error(), api.ErrInvalidArgument.Error()+": "))
	}
	if o.Shared && o.Permits != 0 {
		return errors.New("--shared and --permits: give one (a read lock, or a permit of a semaphore)")
	}
	if err := o.validateShared(); err != nil {
		return err
	}
	if err := o.validatePermits(); err != nil {
		return err
	}
	if err := checkTTL(o.TTL); err != nil {
		return err
	}
	if o.Grace > o.TTL/2 {
		return fmt.Errorf("--grace %v is more than half of --ttl %v: the command must be stopped before the lock's validity ends, and the lock extended before a grace is due; give a shorter --grace or a --ttl of at least %v", o.Grace, o.TTL, 2*o.Grace)
	}
	if o.QuarantineSet && o.Quarantine > 0 && o.Quarantine < o.TTL {
		return fmt.Errorf("--quarantine %v is shorter than --ttl %v: a restarted master could vote while it still owed a lock; give a quarantine of at least the ttl", o.Quarantine, o.TTL)
	}
	return nil
}

// engineOptions are the engine's options for o.
func (o *runOptions) engineOptions() []api.Option {
	opts := []api.Option{
		api.WithTTL(o.TTL),
		// Extended halfway to the point where the command would have to be
		// stopped (--grace before the validity ends), so that an extension
		// has as long again to get through.
		api.WithAutoExtend(extendShare(o.TTL, o.Grace)),
		// The lock lives as long as the command: the command's own lifetime
		// bounds it, not a count of extensions.
		api.WithMaxExtensions(math.MaxInt),
		api.WithFencing(o.Fencing),
	}
	if o.watch != nil {
		opts = append(opts, o.watch.option())
	}
	if o.QuarantineSet {
		if o.Quarantine == 0 {
			opts = append(opts, api.WithoutRestartQuarantine())
		} else {
			opts = append(opts, api.WithRestartQuarantine(o.Quarantine))
		}
	}
	return opts
}

// extendShare is the share of the lock's validity after which run extends
// it: half of the time before the validity has only grace left, so 0.5 with
// no grace and 0.25 with the most grace validate allows (half the ttl).
func extendShare(ttl, grace time.Duration) float64 {
	return float64(ttl-grace) / float64(2*ttl)
}

// dialTimeout bounds how long run waits for each master's first connection
// before it tries the lock (the masters are dialled concurrently).
const dialTimeout = 2 * time.Second

// dialStraggle is how long run still waits for the other masters' first
// connections once a quorum is connected: long enough for a master that is
// merely slower, not for one that hangs (its connection open, nothing
// answering), which would cost every run the whole dialTimeout. (The
// engine's constructor then treats a hung master's run id the same way.)
const dialStraggle = 100 * time.Millisecond

// openRunEngine connects to every master, concurrently, before the engine
// starts, so that the first attempt (the only one with --wait 0) is not
// spent on connections still being made: it waits for all of them, or for a
// quorum and then dialStraggle more, or dialTimeout at most. A master that
// is not connected by then gets a transport that keeps connecting in the
// background.
func openRunEngine(ctx context.Context, o runOptions) (*engine.Engine, error) {
	cfgs := make([]redis.Config, len(o.Nodes))
	clusters := make([]*rediscluster.Config, len(o.Nodes))
	seen := make(map[string]int, len(o.Nodes))
	for i, addr := range o.Nodes {
		if rediscluster.IsAddr(addr) {
			c, err := clusterRunConfig(i, addr, seen)
			if err != nil {
				return nil, err
			}
			clusters[i] = c
			continue
		}
		cfg, err := redis.ParseAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("master %d: %w", i+1, err)
		}
		id := strings.ToLower(cfg.Addr)
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("masters %d and %d are both %s: a master counted twice would vote twice; list each once", j+1, i+1, id)
		}
		seen[id] = i
		cfg.OpTimeout = api.DefaultOptions().MasterTimeout // as engine.New does
		cfgs[i] = cfg
	}
	ts := make([]transport.Transport, len(cfgs))
	errs := make([]error, len(cfgs))
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	up := make(chan struct{}, len(cfgs)) // one per master connected
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() {
			if clusters[i] != nil {
				t, connected, err := dialCluster(dctx, *clusters[i])
				if connected {
					up <- struct{}{}
				}
				ts[i], errs[i] = t, err
				return
			}
			// Not redis.Dial, which closes the transport when ctx ends
			// first: closing waits out a connection attempt that hangs. A
			// master that does not answer by then keeps being tried.
			t, err := redis.New(cfg)
			if err == nil && t.Ping(dctx) == nil {
				up <- struct{}{}
			}
			ts[i], errs[i] = t, err
		})
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	var late <-chan time.Time
	for n := 0; ; {
		select {
		case <-up:
			if n++; n == len(cfgs)/2+1 {
				late = time.After(dialStraggle)
			}
			continue
		case <-late:
			cancel() // the rest connect in the background
		case <-all:
		}
		break
	}
	<-all
	if err := errors.Join(errs...); err != nil {
		for _, t := range ts {
			if t != nil {
				t.Close()
			}
		}
		return nil, err
	}
	return engine.NewWithTransports(ts, o.engineOptions()...)
}

// runCommand takes the lock, runs the command under it and releases it. It
// returns nil or an *exitError with the exit status.
func runCommand(ctx context.Context, o runOptions) error {
	// Catch the signals before anything is held, and keep catching them
	// until the lock is released: a second Ctrl-C must not kill run while
	// the command still runs under the lock.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	o.watch = newWaitWatch()
	defer o.watch.close()
	eng, err := openRunEngine(ctx, o)
	if err != nil {
		return usageErr(err)
	}
	defer eng.Close()

	lock, err := acquire(ctx, eng, o, sigs)
	if err != nil {
		return err
	}
	code, runErr := supervise(lock, o, sigs)

	// Release even after a lost lock: the masters that still hold it let go
	// at once instead of at the ttl. The context is fresh: ctx ends with the
	// first signal, and the release matters most just then.
	uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	uerr := lock.Unlock(uctx)
	cancel()
	if uerr != nil && code != exitLost {
		fmt.Fprintf(o.Stderr, "redlock run: warning: could not release the lock %q (it expires by itself within --ttl %v): %s\n",
			o.Key, o.TTL, strings.TrimPrefix(uerr.Error(), "redlock: "))
	}
	if runErr != nil || code != exitOK {
		return &exitError{code: code, err: runErr}
	}
	return nil
}

// acquire takes the lock, waiting up to o.Wait. A signal while it waits
// ends run with 128+signal.
func acquire(ctx context.Context, eng *engine.Engine, o runOptions, sigs <-chan os.Signal) (api.Lock, error) {
	actx, cancel := context.WithCancel(ctx)
	if o.Wait > 0 {
		actx, cancel = context.WithTimeout(ctx, o.Wait)
	}
	defer cancel()
	type result struct {
		lock api.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.lock, r.err = o.take(actx, eng)
		done <- r
	}()
	var sig os.Signal
	var r result
	// Said once, when the wait passes a second (so never with --wait 1s
	// or less: such a wait never does).
	var noticeC <-chan time.Time
	if o.watch != nil && o.Wait > waitNotice {
		notice := time.NewTimer(waitNotice)
		defer notice.Stop()
		noticeC = notice.C
	}
wait:
	for {
		select {
		case r = <-done:
			break wait
		case sig = <-sigs:
			cancel()
			r = <-done
			break wait
		case <-noticeC:
			fmt.Fprintf(o.Stderr, "redlock run: waiting for the lock %q: %s\n", o.Key, o.watch.explain(eng))
		}
	}
	if sig == nil && ctx.Err() != nil {
		// main's handler saw the signal first; ours has it too, or had it
		// before it was registered (then call it SIGINT: 130).
		select {
		case sig = <-sigs:
		case <-time.After(100 * time.Millisecond):
			sig = syscall.SIGINT
		}
	}
	if sig != nil {
		if r.lock != nil {
			// Won just as the signal came: give it back.
			uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = r.lock.Unlock(uctx)
			ucancel()
		}
		return nil, &exitError{code: 128 + signum(sig), err: fmt.Errorf("interrupted (%s) while waiting for the lock %q", signame(sig), o.Key)}
	}
	if r.err == nil {
		return r.lock, nil
	}
	return nil, lockFailure(eng, o, r.err)
}

// lockFailure turns a failed Lock or TryLock into run's exit status and one
// line that says why, followed by the engine's own message (every master's
// answer).
func lockFailure(eng *engine.Engine, o runOptions, err error) error {
	msg := strings.TrimPrefix(err.Error(), "redlock: ")
	waited := "one attempt, --wait 0"
	if o.Wait > 0 {
		waited = "gave up after --wait " + o.Wait.String()
	}
	n, q := len(eng.Masters()), eng.Quorum()
	switch {
	case errors.Is(err, api.ErrNotAcquired):
		return &exitError{code: exitNotAcquired, err: fmt.Errorf(
			"not acquired: the lock %q is taken: another owner holds it (%s): %s", o.Key, waited, msg)}
	case errors.Is(err, api.ErrQuorumUnreachable):
		// Masters that answered and did not vote are up: say what they
		// did, not that they are unreachable, which sends the reader
		// after the network.
		why := fmt.Sprintf("fewer than %d of the %d masters could vote", q, n)
		a := answersOf(err)
		k, replies, unsafe := a.quarantined, a.replies, a.unsafe
		if k > 0 {
			why += fmt.Sprintf(", %d being in restart quarantine (restarted less than the quarantine period ago; see redlock status)", k)
		}
		if replies > 0 {
			why += fmt.Sprintf(", %d answering with an error reply (up, and refusing the command: each master's answer says why)", replies)
		}
		if unsafe > 0 {
			why += fmt.Sprintf(", %d kept from voting as unsafe for locks (each master's answer says what to change)", unsafe)
		}
		head := "masters unreachable"
		if k+replies+unsafe > 0 {
			head = "masters did not vote"
			if a.unheard > 0 {
				why += fmt.Sprintf(" and %d more that had not answered when the attempt ended", a.unheard)
			}
		}
		return &exitError{code: exitUnreachable, err: fmt.Errorf(
			"not acquired: %s: %s (%s): %s", head, why, waited, msg)}
	case errors.Is(err, context.DeadlineExceeded):
		return &exitError{code: exitUnreachable, err: fmt.Errorf(
			"not acquired: no attempt finished within --wait %v: give a longer --wait: %s", o.Wait, msg)}
	case errors.Is(err, api.ErrInvalidArgument):
		return usageErr(errors.New(msg))
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("not acquired: %s", msg)}
}

// supervise runs the command while the lock is held and returns the exit
// status: the command's, or exitLost.
func supervise(lock api.Lock, o runOptions, sigs <-chan os.Signal) (int, error) {
	c := exec.Command(o.Command[0], o.Command[1:]...)
	c.Stdin, c.Stdout, c.Stderr = o.Stdin, o.Stdout, o.Stderr
	c.Env = childEnv(lock, o.Fencing)
	// See the help: its own process group unless run is a terminal's
	// foreground job, where the command needs the terminal.
	group := !terminalForeground()
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	// If run itself dies (SIGKILL, OOM), the lock expires and the command
	// must not go on without it.
	dieWithParent(c.SysProcAttr)
	if err := c.Start(); err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return code, fmt.Errorf("cannot run %q: %w", o.Command[0], unwrapExec(err))
	}
	pid := c.Process.Pid
	send := func(sig syscall.Signal) {
		if group {
			_ = syscall.Kill(-pid, sig)
		} else {
			_ = c.Process.Signal(sig)
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()

	var (
		lost    error // why the lock was lost
		killAt  time.Time
		killWhy string
		timer   *time.Timer
		kill    <-chan time.Time // fires once, at killAt
		done    = lock.Done()
		// due fires when only --grace of the lock's validity is left, by
		// when an extension should long have been confirmed (extendShare):
		// a lock whose masters stopped answering ends only at its
		// validity's end, too late to give the command its grace.
		due = time.NewTimer(time.Until(lock.Until()) - o.Grace)
	)
	defer due.Stop()
	stop := func(cause error, why string) {
		lost = cause
		// SIGKILL --grace from now, but never after the lock's validity
		// ends: from then on another owner may hold it.
		now := time.Now()
		killAt, killWhy = now.Add(o.Grace), fmt.Sprintf("did not stop within --grace %v", o.Grace)
		after := fmt.Sprintf("after --grace %v", o.Grace)
		if until := lock.Until(); until.Before(killAt) {
			killAt, killWhy = until, "did not stop before the lock's validity ended"
			after = "at once: the lock's validity has ended"
			if left := until.Sub(now); left > 0 {
				after = fmt.Sprintf("in %v, when the lock's validity ends", left.Round(time.Millisecond))
			}
		}
		fmt.Fprintf(o.Stderr, "redlock run: %s; stopping the command: SIGTERM now, SIGKILL %s\n", why, after)
		send(syscall.SIGTERM)
		timer = time.NewTimer(killAt.Sub(now))
		kill = timer.C
		done = nil // fires once
		due.Stop()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-exited:
			if lost == nil {
				// The lock may have been lost as the command ended: it
				// then did not run under the lock all along.
				if err := lock.Err(); err != nil {
					lost = err
					fmt.Fprintf(o.Stderr, "redlock run: lost the lock %q as the command ended: %s\n", o.Key, strings.TrimPrefix(err.Error(), "redlock: "))
				}
			}
			how := exitDescription(c.ProcessState)
			if lost != nil {
				if group {
					reapGroup(pid, killAt, o.Stderr)
				}
				return exitLost, fmt.Errorf("the lock %q was lost while the command ran; the command %s", o.Key, how)
			}
			return exitStatus(c.ProcessState), nil
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if group || sig == syscall.SIGTERM {
				send(sig)
			}
		case <-done:
			err := lock.Err()
			stop(err, fmt.Sprintf("lost the lock %q while the command ran: %s", o.Key, strings.TrimPrefix(err.Error(), "redlock: ")))
		case <-due.C:
			left := time.Until(lock.Until())
			if left > o.Grace {
				due.Reset(left - o.Grace) // extended since
				continue
			}
			stop(fmt.Errorf("no extension of the lock %q was confirmed with %v of its validity left", o.Key, left.Round(time.Millisecond)),
				fmt.Sprintf("the lock %q has not been extended and its validity ends in %v (masters not answering?)", o.Key, left.Round(time.Millisecond)))
		case <-kill:
			fmt.Fprintf(o.Stderr, "redlock run: the command %s: sending SIGKILL\n", killWhy)
			send(syscall.SIGKILL)
		}
	}
}

// reapGroup waits until the command's process group, whose leader has
// exited, has no running process left, and sends SIGKILL to what is left of
// it at killAt: work the command started must not go on without the lock.
func reapGroup(pgid int, killAt time.Time, stderr io.Writer) {
	for groupRunning(pgid) && time.Now().Before(killAt) {
		time.Sleep(50 * time.Millisecond)
	}
	if groupRunning(pgid) {
		fmt.Fprintf(stderr, "redlock run: processes the command started are still running: sending SIGKILL to its process group\n")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// groupRunning reports whether a process of group pgid is still running.
// On Linux zombies do not count: where nobody reaps orphans (a container
// whose init does not) they stay in the group for good.
func groupRunning(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	if runtime.GOOS != "linux" {
		return true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, e := range ents {
		if c := e.Name()[0]; c < '0' || c > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := strings.LastIndexByte(string(b), ')')
		if f := strings.Fields(string(b[i+1:])); len(f) > 2 && f[2] == want && f[0] != "Z" {
			return true
		}
	}
	return false
}

// terminalForeground reports whether run is the foreground job of its
// controlling terminal.
func terminalForeground() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal: cron, systemd, CI
	}
	defer tty.Close()
	fg, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return false
	}
	own, err := unix.Getpgid(0)
	return err == nil && fg == own
}

// childEnv is run's environment with the lock's variables set.
func childEnv(lock api.Lock, fencing bool) []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != envKey && k != envValue && k != envToken {
			env = append(env, kv)
		}
	}
	token := ""
	if fencing {
		token = strconv.FormatInt(lock.Token(), 10)
	}
	return append(env, envKey+"="+lock.Key(), envValue+"="+lock.Value(), envToken+"="+token)
}

// exitStatus is the status a shell would report for the command.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// exitDescription says how the command ended, for messages.
func exitDescription(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by " + signame(ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ps.ExitCode())
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}

// signame is a signal's conventional name, such as SIGTERM.
func signame(s os.Signal) string {
	if n, ok := s.(syscall.Signal); ok {
		if name := unix.SignalName(n); name != "" {
			return name
		}
	}
	return s.String()
}

// unwrapExec drops exec's repetition of the command name.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
