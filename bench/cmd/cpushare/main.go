//go:build unix

// Command cpushare measures the CPU a process with two busy threads gets on
// this machine now: it spins two goroutines (GOMAXPROCS 2) for -d and prints
// the process's CPU over the wall time, in cores. Run beside a load (CPU
// hogs, other engineers) it is the most CPU a held-lock client could have
// at that load (BENCHMARKS.md, "Held locks under load"). It reads its CPU
// with getrusage(2), so it builds on Unix only.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func main() {
	d := flag.Duration("d", 3*time.Second, "how long to spin")
	flag.Parse()
	runtime.GOMAXPROCS(2)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			fmt.Fprintln(os.Stderr, "cpushare:", err)
			os.Exit(1)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, t0 := cpu(), time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			x := 0
			for time.Since(t0) < *d {
				for i := range 1 << 16 {
					x += i
				}
			}
			_ = x
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	fmt.Printf("cores %.3f (cpu %v over %v)\n", float64(cpu()-c0)/float64(wall), (cpu() - c0).Round(time.Millisecond), wall.Round(time.Millisecond))
}
