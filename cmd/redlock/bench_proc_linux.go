package main

import "syscall"

// redisSysProcAttr puts a redis-server started by bench --spawn-redis in a
// process group of its own, so that a Ctrl-C on the terminal reaches only
// redlock, which then stops the servers itself, and has the kernel kill it
// should redlock die without stopping it (kill -9, a crash).
func redisSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
