package actors

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// Lone calls run on their callers' goroutines (lonecall.go). Many callers
// that each find the coordinator idle must still run it one at a time (the
// race detector sees the coordinator's maps otherwise), and Close while
// calls run inline must end every submitted call (Submit's contract: after
// a nil return, Done is closed), refuse later ones with ErrClosed, and
// leave no goroutine behind (goleak, TestMain).
func TestLoneCallsConcurrentAndClose(t *testing.T) {
	ts := []transport.Transport{memory.New().Transport(), memory.New().Transport(), memory.New().Transport()}
	c, err := Start(Config{Transports: ts, Names: []string{"a", "b", "c"}, MasterTimeout: time.Second, MaxBatch: 64, MaxInFlight: 1, Coordinators: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var calls []*Call
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := fmt.Sprintf("k%d-%d", g, i%3)
				call := NewCall(Acquire, "trylock", k, "v", time.Minute, time.Millisecond)
				call.Retry.MaxAttempts = 1
				if err := c.Submit(call); err != nil {
					if !errors.Is(err, api.ErrClosed) {
						t.Errorf("Submit: %v, want nil or ErrClosed", err)
					}
					return
				}
				mu.Lock()
				calls = append(calls, call)
				mu.Unlock()
				select {
				case <-call.Done(): // Close ends it, if nothing else does
				case <-time.After(30 * time.Second):
					t.Errorf("a call (%q) never finished", k)
					return
				}
				if call.Err == nil {
					rel := NewCall(Release, "unlock", k, "v", time.Minute, time.Millisecond)
					if err := c.Submit(rel); err != nil {
						return
					}
					mu.Lock()
					calls = append(calls, rel)
					mu.Unlock()
					<-rel.Done()
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the callers run: the load, not a wait for an event
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(calls) == 0 {
		t.Fatal("no call was submitted before Close")
	}
	for _, call := range calls {
		select {
		case <-call.Done():
		default:
			t.Fatalf("a call submitted before Close (%v %q) never finished", call.Kind, call.Key)
		}
	}
}
