package actors

import "time"

// clockBase is the origin of an opRequest's deadline: nanoseconds since
// it (monotonic where both times carry a monotonic reading) fit in 8 bytes
// where a time.Time takes 24. That keeps an opRequest at 128 bytes, a size
// class below 144: two are allocated per lock cycle (the SET's and the
// release's). Offsets may be negative (under testing/synctest the clock
// starts in 2000); 0 is "no deadline", so that an opRequest made without
// one has none.
var clockBase = time.Now()

// sinceBase is t as an opRequest deadline; the zero time is 0. A time
// exactly at the base becomes 1 ns later, which no deadline check can
// tell apart.
func sinceBase(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if d := int64(t.Sub(clockBase)); d != 0 {
		return d
	}
	return 1
}
