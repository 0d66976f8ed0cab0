package memory_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// The read-write keys on the bubble's clock too (see
// TestExpiryInSynctestBubble): inside a synctest bubble monotime is
// negative, and a reader key must still go when its last reader is
// released or expires. Otherwise the key outlives its readers there, so
// "no key left after Unlock" fails for an RLock, and a plain Lock of the
// key is refused for as long as the bubble runs.
func TestReadersGoInSynctestBubble(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, c transport.Transport)
	}{
		{"released", func(t *testing.T, c transport.Transport) {
			if r := do(t, c, transport.Op{Kind: transport.ReleaseShared, Key: "k", Value: "r"}); !r[0].OK {
				t.Fatalf("release of the reader: %+v", r[0])
			}
		}},
		{"expired", func(t *testing.T, c transport.Transport) { time.Sleep(time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := memory.New()
				c := m.Transport()
				defer c.Close()
				if r := do(t, c, transport.Op{Kind: transport.AcquireShared, Key: "k", Value: "r", TTL: time.Second}); !r[0].OK {
					t.Fatalf("reader: %+v", r[0])
				}
				tc.end(t, c)
				if n := m.Len(); n != 0 {
					t.Fatalf("%d keys left once the only reader was %s", n, tc.name)
				}
				if r := do(t, c, acq("k", "w", time.Second)); !r[0].OK {
					t.Fatalf("a plain acquire of the key once its only reader was %s: %+v", tc.name, r[0])
				}
			})
		})
	}
}
