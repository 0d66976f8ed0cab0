package bench

import "time"

// Machine is a reading of the whole machine's CPU time by state (the "cpu"
// line of /proc/stat, all cores summed) and of the CPU time of chosen
// processes (the Redis masters; /proc/<pid>/stat). Two readings subtracted,
// with the client's own Cost and the wall time between them, account for
// every core-microsecond of a run (Account): the question it answers is
// whether a run was limited by CPU (no idle left) or by something else
// (idle cores while work waited: wake-up latency, batches too small).
type Machine struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal time.Duration
	// Procs is the user plus system time of the processes asked for; a
	// process that has exited is missing from it, so read it before and
	// after a run while they live.
	Procs time.Duration
	// Cores is the number of cores /proc/stat counts (cpuN lines).
	Cores int
	// Have says /proc/stat was read; HaveProcs that every process was.
	Have, HaveProcs bool
}

// Busy is the time the cores ran something: everything but idle, iowait
// and steal (steal is time the hypervisor gave this VM's core to another).
func (m Machine) Busy() time.Duration {
	return m.User + m.Nice + m.System + m.IRQ + m.SoftIRQ
}

// Total is all the time the cores had, in every state.
func (m Machine) Total() time.Duration {
	return m.Busy() + m.Idle + m.IOWait + m.Steal
}

// Sub is m minus an earlier reading.
func (m Machine) Sub(e Machine) Machine {
	return Machine{
		User: m.User - e.User, Nice: m.Nice - e.Nice, System: m.System - e.System,
		Idle: m.Idle - e.Idle, IOWait: m.IOWait - e.IOWait, IRQ: m.IRQ - e.IRQ,
		SoftIRQ: m.SoftIRQ - e.SoftIRQ, Steal: m.Steal - e.Steal,
		Procs: m.Procs - e.Procs, Cores: m.Cores,
		Have: m.Have && e.Have, HaveProcs: m.HaveProcs && e.HaveProcs,
	}
}

// Account is a run's machine time per cycle, in microseconds. Client,
// Servers and Others are processes' CPU; Idle and Steal are time no process
// of this VM used. They add up to Measured, the cores' time as /proc/stat
// counts it, which should be close to Total = cores × wall / cycles.
//
// SoftIRQ and IRQ are the machine's interrupt work (on loopback, softirq
// is where a sent packet is delivered to the receiving socket). The kernel
// here charges an interrupt that hits a running process to that process's
// system time as well (no CONFIG_IRQ_TIME_ACCOUNTING), so SoftIRQ overlaps
// Client, Servers and Others: it is a "these include", not a further term.
type Account struct {
	Client   float64 `json:"client_us"`
	Servers  float64 `json:"servers_us"`
	Others   float64 `json:"others_us"` // busy time of every other process (other users' work, kernel threads)
	Idle     float64 `json:"idle_us"`   // idle + iowait
	Steal    float64 `json:"steal_us"`
	SoftIRQ  float64 `json:"softirq_us"` // irq + softirq, included in the terms above
	Measured float64 `json:"measured_us"`
	Total    float64 `json:"total_us"` // cores × wall
}

// AccountFor divides a run's machine delta m (with Procs the servers' CPU),
// the client's own CPU and its wall time over cycles (> 0).
func AccountFor(m Machine, client time.Duration, wall time.Duration, cycles int64) Account {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(cycles) }
	a := Account{
		Client:   us(client),
		Servers:  us(m.Procs),
		Idle:     us(m.Idle + m.IOWait),
		Steal:    us(m.Steal),
		SoftIRQ:  us(m.IRQ + m.SoftIRQ),
		Measured: us(m.Total()),
		Total:    us(wall) * float64(m.Cores),
	}
	a.Others = us(m.Busy()) - a.Client - a.Servers
	return a
}
