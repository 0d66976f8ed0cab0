package redistest_test

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestStartCluster(t *testing.T) {
	t0 := time.Now()
	s := redistest.StartCluster(t, 3)
	t.Log(time.Since(t0))
	var slots []any
	s[0].Do(t, &slots, "CLUSTER", "SLOTS")
	t.Logf("%#v", slots)
}
