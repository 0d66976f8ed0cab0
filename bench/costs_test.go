package bench_test

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
)

// cpuPerOp reports the process's CPU time per op since c0 as cpu-ns/op,
// which a loaded machine inflates far less than ns/op (wall time).
func cpuPerOp(b *testing.B, c0 bench.Cost) {
	c := bench.ReadCost().Sub(c0)
	if c.HaveCPU && b.N > 0 {
		b.ReportMetric(float64(c.CPU)/float64(time.Nanosecond)/float64(b.N), "cpu-ns/op")
	}
}

// The machine's unit costs, so that a reader can turn the benchmarks'
// syscalls and context switches per cycle into time (BENCHMARKS.md, "Round
// 2"):
//
//	go test -run '^$' -bench 'Cost' ./bench

// BenchmarkCostSyscall is one trivial system call (getppid: no vDSO, no
// work): the kernel entry and exit alone.
func BenchmarkCostSyscall(b *testing.B) {
	c0 := bench.ReadCost()
	for b.Loop() {
		syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
	}
	cpuPerOp(b, c0)
}

// BenchmarkCostWrite is a 64-byte write(2) to /dev/null through os.File.
func BenchmarkCostWrite(b *testing.B) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	c0 := bench.ReadCost()
	for b.Loop() {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	cpuPerOp(b, c0)
}

// BenchmarkCostLoopback is a 64-byte request and its 64-byte answer over a
// loopback TCP connection to an echo goroutine: two writes, two reads that
// find data, and the wake-ups in between (what one batch's round trip costs
// the client, less the server's work).
func BenchmarkCostLoopback(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64)
	c0 := bench.ReadCost()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
	cpuPerOp(b, c0)
	c.Close()
	<-done
}

// BenchmarkCostHandoff is one goroutine hand-off and back: a value sent on
// an unbuffered channel to a goroutine that answers on another (two wakes
// of a parked goroutine per op, no system call when both fit on the Ps).
func BenchmarkCostHandoff(b *testing.B) {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
		close(pong)
	}()
	c0 := bench.ReadCost()
	for b.Loop() {
		ping <- 1
		<-pong
	}
	cpuPerOp(b, c0)
	close(ping)
	<-pong
}
