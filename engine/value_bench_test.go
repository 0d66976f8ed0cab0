package engine

import "testing"

// BenchmarkNewValue is the cost of a lock's value: the engine's generator
// against a crypto/rand read (a handle made without New).
func BenchmarkNewValue(b *testing.B) {
	for _, bc := range []struct {
		name string
		e    *Engine
	}{{"aes", &Engine{values: newValues()}}, {"cryptorand", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			l := &lock{e: bc.e}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				l := &lock{e: l.e}
				for pb.Next() {
					_ = l.newValue()
				}
			})
		})
	}
}
