package actors

import (
	"testing"
	"testing/synctest"
	"time"
)

// monoNow is the clock's now, read from base: in a bubble, where time
// moves only by the test's sleeps, it is exactly time.Now, and its
// distance from base is exactly the time slept, with or without base's
// monotonic reading.
func TestMonoNowIsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Now()
		time.Sleep(1500 * time.Millisecond)
		for _, b := range []time.Time{base, base.Round(0)} { // Round(0) strips the monotonic reading
			got := monoNow(b)
			if now := time.Now(); !got.Equal(now) || got.Sub(b) != 1500*time.Millisecond {
				t.Errorf("monoNow(%v) = %v, %v after base; want %v, 1.5s after", b, got, got.Sub(b), now)
			}
		}
	})
}
