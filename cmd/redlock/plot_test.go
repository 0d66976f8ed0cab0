package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/quorumlock/redlock/bench"
)

// TestPlotNoCycles: a run in which no cycle finished (a short run on a busy
// machine: every cycle was cut short by the end of the run) still gets its
// chart, with empty panels.
func TestPlotNoCycles(t *testing.T) {
	for _, ext := range []string{".png", ".svg"} {
		t.Run(ext, func(t *testing.T) {
			rep := &benchReport{hist: bench.NewRecorder().Histogram()}
			file := filepath.Join(t.TempDir(), "bench"+ext)
			if err := writePlot(file, rep); err != nil {
				t.Fatalf("writePlot: %v", err)
			}
			if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
				t.Fatalf("no chart written: %v", err)
			}
		})
	}
}
