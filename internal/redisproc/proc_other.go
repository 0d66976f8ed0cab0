//go:build !linux

package redisproc

import "syscall"

// sysProcAttr: only Linux can tie a child's life to ours; elsewhere Stop is
// the only guard.
func sysProcAttr() *syscall.SysProcAttr { return nil }
