package actors

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var errNodeBoom = errors.New("noderestart24: a panic on every returned batch of boom- keys")

// A node actor restarts after a panic (node18), but it ran under
// protoactor's default supervisor, which stops an actor that failed more
// than 10 times in 10 seconds: coord19 took the coordinators out of its
// hands (coordRoot, now restartingRoot) and left the nodes in them. A panic that comes back on
// every batch (a user's meter that panics as a batch is recorded, a bug of
// ours on some op) then stops the node for good: its master gets no op
// again, and every later call waits on a reply that cannot come.
//
// Node 0 panics on each returned batch that holds a boom- key, 15 times
// within a second of the bubble's clock; then a plain call must still be
// granted on all three masters, node 0's included, and be released there,
// and Close must return.
func TestNodeRestartsEveryTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, ts, names := memoryMasters(3)
		victim := ts[0]
		testNodeHook = func(n *node, msg any) {
			b, ok := msg.(*batch)
			if !ok || n.t != victim {
				return
			}
			for _, op := range b.ops {
				if strings.HasPrefix(op.Key, "boom-") {
					panic(errNodeBoom)
				}
			}
		}
		c, err := Start(Config{Transports: ts, Names: names, MasterTimeout: 100 * time.Millisecond, MaxBatch: 64, MaxInFlight: 1, Coordinators: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if !closeWithin(t, c, time.Minute) {
				t.Errorf("Close did not return after node 0's restarts")
			}
			testNodeHook = nil
		}()
		start := time.Now()
		for i := range 15 {
			// Granted by masters 1 and 2 or not: node 0's result is lost
			// to the panic either way. Only the answer matters here.
			if _, ok := tryOnce(t, c, fmt.Sprintf("boom-%d", i)); !ok {
				return
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("15 panics took %v of the bubble's clock: the test wants them within the supervisor's 10s window", d)
		}
		call, ok := tryOnce(t, c, "ok")
		if !ok {
			return
		}
		if call.Err != nil {
			t.Fatalf("a call after node 0's 15 panics: %v", call.Err)
		}
		synctest.Wait()
		if _, ok := ms[0].Get("ok"); !ok {
			t.Fatal("master 0 does not hold the lock taken after its node's 15 panics: the node actor no longer sends its master anything")
		}
		rel := NewCall(Release, "unlock", "ok", "v", time.Minute, time.Millisecond)
		if err := c.Submit(rel); err != nil {
			t.Fatal(err)
		}
		<-rel.Done()
		synctest.Wait()
		for i, m := range ms {
			if _, ok := m.Get("ok"); ok {
				t.Errorf("master %d still holds the key after the unlock", i)
			}
		}
	})
}
