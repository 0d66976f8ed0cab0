package engine

import (
	"encoding/base64"
	mrand "math/rand/v2"
	"sync"
	"testing"
)

// Lock values drawn at once on every P are distinct and well formed, and
// each generator the pool makes starts from a seed of its own: generators
// seeded alike would repeat each other's values across cores and processes.
func TestLockValuesAreDistinct(t *testing.T) {
	const goroutines, each = 8, 2000
	var (
		mu   sync.Mutex
		seen = make(map[string]bool, goroutines*each)
		wg   sync.WaitGroup
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vs := make([]string, each)
			for i := range vs {
				vs[i] = new(lock).newValue()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range vs {
				if b, err := base64.RawURLEncoding.DecodeString(v); err != nil || len(b) != 16 || len(v) != valueLen {
					t.Errorf("value %q: want 16 bytes in %d characters of unpadded base64url (%v)", v, valueLen, err)
				}
				if seen[v] {
					t.Errorf("value %q drawn twice", v)
				}
				seen[v] = true
			}
		}()
	}
	wg.Wait()

	a, b := values.New().(*mrand.ChaCha8), values.New().(*mrand.ChaCha8)
	if a.Uint64() == b.Uint64() && a.Uint64() == b.Uint64() {
		t.Fatal("two of the pool's generators drew the same values: their seeds are not their own")
	}
}
