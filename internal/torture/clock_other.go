//go:build !linux

package torture

import (
	"errors"
	"syscall"
)

var errNoClientPause = errors.New("client-pause needs Linux (CLOCK_MONOTONIC across processes, Pdeathsig)")

func monoNow() (int64, error)              { return 0, errNoClientPause }
func workerProcAttr() *syscall.SysProcAttr { return nil }
func stopProcess(int) error                { return errNoClientPause }
func contProcess(int) error                { return errNoClientPause }
func calibrate() (monoCal, error)          { return monoCal{}, errNoClientPause }

const clientPauseSupported = false
