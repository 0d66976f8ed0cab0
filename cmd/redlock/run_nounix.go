//go:build !unix

package main

import (
	"errors"
	"runtime"

	"github.com/spf13/cobra"
)

func init() { register(newRunCmd) }

// newRunCmd is run where it cannot work, so that "redlock run" says why
// instead of "unknown command".
func newRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "run --key KEY [flags] [--] COMMAND [ARGS...]",
		Short:              "Run a command while holding a lock (needs a Unix)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return &exitError{code: exitUsage, err: errRunNeedsUnix}
		},
	}
}

// errRunNeedsUnix says why run is missing here.
var errRunNeedsUnix = errors.New("run needs a Unix: it runs the command in a process group of its own and stops the group with SIGTERM, then SIGKILL, when the lock is lost; " + runtime.GOOS + " has neither")
