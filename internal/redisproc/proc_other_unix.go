//go:build unix && !linux

package redisproc

import "syscall"

// sysProcAttr puts redis-server in a process group of its own, so that a
// Ctrl-C on the terminal reaches only the program, which then stops its
// servers itself. Only Linux can also tie a child's life to ours; elsewhere
// Stop is the only guard.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
