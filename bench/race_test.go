//go:build race

package bench_test

// raceEnabled: the race detector slows the engine five to ten times, which
// turns the overload test into a test of the detector.
const raceEnabled = true
