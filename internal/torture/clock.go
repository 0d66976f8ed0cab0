package torture

import "time"

// monoCal pairs CLOCK_MONOTONIC with this process's time.Time readings, for
// the times the engine hands out as time.Time (Lock.Until).
type monoCal struct {
	base int64
	at   time.Time
}

// mono converts a time.Time of this process to CLOCK_MONOTONIC.
func (c monoCal) mono(t time.Time) int64 { return c.base + int64(t.Sub(c.at)) }

// now reads CLOCK_MONOTONIC.
func (c monoCal) now() int64 {
	if n, err := monoNow(); err == nil {
		return n
	}
	return c.mono(time.Now()) // not reached where calibrate succeeded
}
