//go:build !unix

package redisproc

import (
	"os"
	"syscall"
)

// sysProcAttr: nothing to add off Unix; Stop is the only guard.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// CanPause reports whether Pause and Resume work here: there is no SIGSTOP
// off Unix, so they fail with errors.ErrUnsupported.
const CanPause = false

var pauseSignal, resumeSignal os.Signal
