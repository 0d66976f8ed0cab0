//go:build !unix

package benchtest

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
