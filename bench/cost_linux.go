//go:build linux

package bench

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// ReadCost reads this process's counters.
func ReadCost() Cost {
	var c Cost
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		c.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		c.Voluntary, c.Involuntary = int64(ru.Nvcsw), int64(ru.Nivcsw) // int32 on 32-bit Linux
		c.HaveCPU = true
	}
	// The read of /proc/self/io is itself one read(2): noise of one call
	// per measurement, not per cycle.
	if b, err := os.ReadFile("/proc/self/io"); err == nil {
		var r, w bool
		for line := range bytes.Lines(b) {
			k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte(": "))
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				continue
			}
			switch string(k) {
			case "syscr":
				c.Reads, r = n, true
			case "syscw":
				c.Writes, w = n, true
			}
		}
		c.HaveIO = r && w
	}
	return c
}
