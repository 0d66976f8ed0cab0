//go:build race

package main

// raceEnabled: the tests run under the race detector, so build the binary
// with it too.
const raceEnabled = true
