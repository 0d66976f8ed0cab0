package engine

import (
	"sync"
	"testing"
)

// Values stay unique under concurrent draws, across engines too, and keep
// their 22-character form.
func TestValuesUniqueAcrossDrawsAndEngines(t *testing.T) {
	e1, e2 := &Engine{values: newValues()}, &Engine{values: newValues()}
	if e1.values == nil || e2.values == nil {
		t.Fatal("newValues returned nil")
	}
	const goroutines, per = 8, 5000
	var mu sync.Mutex
	seen := make(map[string]bool, 2*goroutines*per)
	var wg sync.WaitGroup
	for g := range goroutines {
		e := e1
		if g%2 == 1 {
			e = e2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]string, 0, per)
			for range per {
				l := &lock{e: e}
				got = append(got, l.newValue())
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range got {
				if len(v) != valueLen {
					t.Errorf("value %q has length %d, want %d", v, len(v), valueLen)
				}
				if seen[v] {
					t.Errorf("value %q drawn twice", v)
				}
				seen[v] = true
			}
		}()
	}
	wg.Wait()
	// Two engines' first values differ (independent keys), and a handle
	// made without New still gets a value.
	a, b := (&lock{e: &Engine{values: newValues()}}).newValue(), (&lock{e: &Engine{values: newValues()}}).newValue()
	if a == b {
		t.Errorf("two engines drew the same first value %q", a)
	}
	if v := (&lock{}).newValue(); len(v) != valueLen {
		t.Errorf("value without an engine: %q", v)
	}
}
