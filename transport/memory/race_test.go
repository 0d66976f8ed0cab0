//go:build race

package memory_test

func init() { raceEnabled = true }
