package redisproc

import "syscall"

// sysProcAttr puts redis-server in a process group of its own, so that a
// Ctrl-C on the terminal reaches only the program, which then stops its
// servers itself, and makes the kernel kill redis-server when the program
// that started it dies without stopping it (a panic on another goroutine,
// kill -9), so no server is left behind. Strictly the death signal follows
// the OS thread that started the process, and the Go runtime keeps its
// threads alive unless a goroutine exits while locked to one, which this
// package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
