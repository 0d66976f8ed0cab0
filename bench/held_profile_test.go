package bench_test

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
)

// profileWindow starts what heldProfileEnv asks for at the start of a
// held-locks window and returns what ends it. Only the window is profiled:
// the test binary's -test.cpuprofile would mix in the taking of the locks
// and the first round of extensions, which are not what holding costs.
func profileWindow(b *testing.B, n int) (stop func()) {
	prefix := os.Getenv(heldProfileEnv)
	if prefix == "" {
		return func() {}
	}
	name := prefix + "-" + strconv.Itoa(n)
	heap, err := os.Create(name + ".heap.pprof")
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC() // the heap profile shows live objects as of the last GC
	err = pprof.Lookup("heap").WriteTo(heap, 0)
	if cerr := heap.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	cpu, err := os.Create(name + ".cpu.pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			b.Error(err)
		}
		b.Logf("profiles of the window: %s.cpu.pprof, %s.heap.pprof", name, name)
	}
}
