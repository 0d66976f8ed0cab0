//go:build unix

package redisproc

import (
	"os"
	"syscall"
)

// pauseSignal and resumeSignal stop and continue a process.
var pauseSignal, resumeSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
