package main

import (
	"path/filepath"
	"testing"
)

// A bench whose every cycle failed, or that ended before one finished (a
// short --duration on a loaded machine), has no latency to plot: --plot must
// still write its chart, not panic on an empty log-scale axis.
func TestPlotWithoutCycles(t *testing.T) {
	for _, name := range []string{"empty.png", "empty.svg"} {
		if err := writePlot(filepath.Join(t.TempDir(), name), &benchReport{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
