package api_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine itself, but its examples and tests build
// engines, which do: each must be closed with nothing left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
