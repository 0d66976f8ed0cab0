package main

import (
	"fmt"
	"io"

	"github.com/quorumlock/redlock/internal/torture"
)

// printStarved lists the overruns the checker put down to a starved
// process (history.Starved), after the violations.
func printStarved(w io.Writer, r *torture.Report) {
	if r.Starved.Count == 0 {
		return
	}
	fmt.Fprintf(w, "\nSTARVED (%d overruns explained by a late wake-up of the holder or of its process's probe; %d listed):\n", r.Starved.Count, len(r.Starved.List))
	for _, v := range r.Starved.List {
		fmt.Fprintf(w, "  %s\n", v)
	}
}
