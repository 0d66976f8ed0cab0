package main

import "syscall"

// dieWithParent has the kernel kill the command when run dies, whatever
// the cause: an unguarded command must not outlive its lock.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
