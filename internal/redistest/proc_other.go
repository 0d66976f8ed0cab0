//go:build !linux

package redistest

import "syscall"

// sysProcAttr: only Linux can tie a child's life to ours; elsewhere t.Cleanup
// is the only guard.
func sysProcAttr() *syscall.SysProcAttr { return nil }
