//go:build unix

package redisproc

import (
	"os"
	"syscall"
)

// CanPause reports whether Pause and Resume work here (SIGSTOP, SIGCONT).
const CanPause = true

// pauseSignal and resumeSignal stop and continue a process.
var pauseSignal, resumeSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
