//go:build linux

package bench

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/stat and /proc/<pid>/stat: USER_HZ, 100 on
// every Linux architecture Go runs on.
const userHZ = 100

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// ReadMachine reads /proc/stat and the CPU time of pids. Its resolution is a
// tick (10 ms of one core), so runs of a second or more are needed for
// per-cycle figures to mean anything.
func ReadMachine(pids []int) Machine {
	var m Machine
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for line := range bytes.Lines(b) {
			f := bytes.Fields(line)
			if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("cpu")) {
				continue
			}
			if len(f[0]) > 3 {
				m.Cores++
				continue
			}
			var v [8]int64
			for i := range v {
				if i+1 < len(f) {
					v[i], _ = strconv.ParseInt(string(f[i+1]), 10, 64)
				}
			}
			m.User, m.Nice, m.System, m.Idle = ticks(v[0]), ticks(v[1]), ticks(v[2]), ticks(v[3])
			m.IOWait, m.IRQ, m.SoftIRQ, m.Steal = ticks(v[4]), ticks(v[5]), ticks(v[6]), ticks(v[7])
			m.Have = len(f) > 8
		}
	}
	m.HaveProcs = len(pids) > 0
	for _, pid := range pids {
		d, ok := procCPU(pid)
		m.Procs += d
		m.HaveProcs = m.HaveProcs && ok
	}
	return m
}

// procCPU is utime + stime of pid (fields 14 and 15 of /proc/<pid>/stat,
// counted after the command name, which may hold spaces).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ticks(u + s), true
}
