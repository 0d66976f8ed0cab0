// Command xcore prints how long a cache line takes to go between two cores
// and back on this machine now (bench.CoreRoundTrip), as "xcore-ns N".
// bench/interleave.sh runs it before and after every benchmark run, so that
// a build whose test binary does not report xcore-before-ns and
// xcore-after-ns itself (an old commit's) can still be placed
// (bench/placement.py).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/quorumlock/redlock/bench"
)

func main() {
	rounds := flag.Int("n", 200_000, "round trips")
	flag.Parse()
	d, ok := bench.CoreRoundTrip(*rounds, 2*time.Second)
	if !ok {
		fmt.Fprintln(os.Stderr, "xcore: cannot measure (fewer than two cores, or a core was taken away for 2s)")
		os.Exit(1)
	}
	fmt.Printf("xcore-ns %.1f\n", float64(d))
}
