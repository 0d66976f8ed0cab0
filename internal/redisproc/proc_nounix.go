//go:build !unix

package redisproc

import (
	"os"
	"syscall"
)

// sysProcAttr: nothing to add off Unix; Stop is the only guard.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// pauseSignal and resumeSignal: there is no SIGSTOP off Unix, so Pause and
// Resume fail with errors.ErrUnsupported.
var pauseSignal, resumeSignal os.Signal
