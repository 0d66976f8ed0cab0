// Command redlock runs and exercises the Redlock engine.
//
//	redlock demo      oversell a small shop without the lock, then not with it
//
// Every subcommand lives in its own file and registers itself on the root
// command with register from an init function.
//
// Exit status: 0 success, 1 failure, 2 usage or setup error (a bad flag or
// value, a bad master address), 130 interrupted (Ctrl-C).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/check"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128+SIGINT, as shells report it
)

// subcommands are the constructors registered by the subcommands' files.
var subcommands []func() *cobra.Command

// register adds a subcommand to the root; call it from an init function.
func register(newCmd func() *cobra.Command) { subcommands = append(subcommands, newCmd) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, let a second one kill the process at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// Not from a RunE: cobra refused the command line (unknown command,
		// flag or argument) before anything ran.
		ee = usageErr(err)
	}
	if ee.err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), oneLine(ee.err))
	}
	if ee.usage {
		fmt.Fprint(stderr, "\n"+cmd.UsageString())
	}
	return ee.code
}

// nodesForms is how every subcommand's --nodes help names the forms a master
// can take: they all parse --nodes alike (splitNodes).
const nodesForms = "host:port, redis://[user:pass@]host:port[/db], rediss://..., or a Redis Cluster as redis+cluster://host:port[;host:port...]"

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "redlock",
		Short: "Distributed locks over N independent masters (Redlock)",
		Long: `redlock takes distributed locks over N independent masters: a lock is held
once a majority (N/2+1) of them stored it. Masters come from --nodes or the
REDLOCK_NODES environment variable (host:port, redis:// or rediss:// URLs, or
a Redis Cluster as redis+cluster://host:port[;host:port...]).
demo and bench run on five embedded in-memory masters when none are given;
run and status need real ones.`,
		SilenceUsage:  true, // run prints usage itself, for usage errors only
		SilenceErrors: true, // run prints the one line
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.SetFlagErrorFunc(flagError)
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd())
	}
	return root
}

// exitError carries an exit status out of a RunE. err, when set, is printed
// as one line; usage adds the command's usage after it.
type exitError struct {
	code  int
	err   error
	usage bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr is a wrong command line: one line plus the usage, exit 2.
func usageErr(err error) *exitError { return &exitError{code: exitUsage, err: err, usage: true} }

// usagef is usageErr with a formatted message.
func usagef(format string, args ...any) *exitError { return usageErr(fmt.Errorf(format, args...)) }

// flagError rewrites pflag's errors into one plain line.
func flagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) {
		f := ive.GetFlag()
		want := ive.Unwrap().Error()
		switch f.Value.Type() {
		case "int", "int64", "uint", "uint64":
			want = "want a whole number"
		case "duration":
			want = "want a duration such as 5s, 250ms or 1m"
		case "bool":
			want = "want true or false"
		}
		err = fmt.Errorf("invalid value %q for --%s: %s", ive.GetValue(), f.Name, want)
	}
	return usageErr(err)
}

// oneLine folds a multi-line message (cobra's "Did you mean this?") into one.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.Index(s, "\n\nDid you mean this?\n"); i >= 0 {
		var sugg []string
		for _, l := range strings.Split(s[i:], "\n") {
			if l = strings.TrimSpace(l); l != "" && l != "Did you mean this?" {
				sugg = append(sugg, l)
			}
		}
		s = s[:i] + " (did you mean " + strings.Join(sugg, " or ") + "?)"
	}
	s = strings.Join(strings.Fields(s), " ")
	// The engine's errors start with "redlock: ", which the command path
	// already says.
	return strings.TrimPrefix(s, "redlock: ")
}

// flagsOnly is the Args check of a subcommand that takes no arguments.
// checkTTL says what is wrong with a --ttl, in the engine's own words
// (zero, negative, or too short for the drift).
func checkTTL(ttl time.Duration) error {
	if _, err := check.Engine([]api.Option{api.WithTTL(ttl)}); err != nil {
		return fmt.Errorf("--ttl %v: %w", ttl, err)
	}
	return nil
}

func flagsOnly(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected argument %q: %s takes only flags", args[0], name)
		}
		return nil
	}
}

// masters returns the masters named by --nodes, else by REDLOCK_NODES; nil
// when neither names any (the subcommand decides what that means).
func masters(cmd *cobra.Command, nodes string) []string {
	if cmd.Flags().Changed("nodes") {
		return splitNodes(nodes)
	}
	if env := os.Getenv(nodesEnv); strings.TrimSpace(env) != "" {
		return splitNodes(env)
	}
	return nil
}
