package memory_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/transport/memory"
)

// Inside a synctest bubble the clock starts at 2000-01-01, before the
// package's time base: keys must still expire on the bubble's clock, or
// every memory-transport test run under synctest sees keys live forever.
func TestExpiryInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memory.New()
		c := m.Transport()
		defer c.Close()
		do(t, c, acq("k", "v", 100*time.Millisecond))
		time.Sleep(99 * time.Millisecond)
		if _, ok := m.Get("k"); !ok {
			t.Fatal("the key expired before its ttl")
		}
		time.Sleep(time.Millisecond)
		if v, ok := m.Get("k"); ok {
			t.Fatalf("the key (%q) outlived its 100ms ttl in a synctest bubble", v)
		}
		if r := do(t, c, acq("k", "w", time.Second)); !r[0].OK {
			t.Fatalf("acquire of an expired key: %+v", r[0])
		}
	})
}
