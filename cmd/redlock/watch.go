package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// watchStatus redraws the per-master table every o.Watch until ctx ends
// (Ctrl-C), then returns nil: watching has no verdict of its own. On a
// terminal each round replaces the last; elsewhere (a pipe, a file) the
// rounds follow each other, each under a line with its time, and --json
// prints one object per line.
func watchStatus(ctx context.Context, w io.Writer, o statusOptions) error {
	t := time.NewTicker(o.Watch)
	defer t.Stop()
	return watchRounds(ctx, w, o, t.C, time.Now)
}

// watchRounds is watchStatus with its ticks and its clock given, so that a
// test can run the rounds one at a time, change the masters between them
// and move the clock without waiting: a round at once, then one per tick.
func watchRounds(ctx context.Context, w io.Writer, o statusOptions, tick <-chan time.Time, now func() time.Time) error {
	term := isTerminal(w)
	for {
		rep := checkMasters(ctx, o)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case o.JSON:
			if err := json.NewEncoder(w).Encode(rep); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
		default:
			if term {
				fmt.Fprint(w, clearScreen)
			}
			fmt.Fprintf(w, "every %v, %s (Ctrl-C to stop)\n", o.Watch, now().Format("15:04:05"))
			printStatus(w, rep, o)
			if !term {
				fmt.Fprintln(w)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}
