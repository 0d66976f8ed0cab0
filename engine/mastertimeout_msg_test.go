package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// silentMaster never answers: Do waits for its batch's deadline.
type silentMaster struct{ transport.Transport }

func (silentMaster) Do(ctx context.Context, ops []transport.Op, res []transport.Result) error {
	<-ctx.Done()
	return transport.Fail(res, ctx.Err())
}

// A caller that set no deadline of its own is told which deadline passed:
// the master timeout, and the option that sets it, not a bare "context
// deadline exceeded".
func TestSilentMastersNameTheMasterTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ts []transport.Transport
		for range 3 {
			ts = append(ts, silentMaster{memory.New().Transport()})
		}
		e, err := engine.NewWithTransports(ts, api.WithMasterTimeout(50*time.Millisecond), api.WithoutRestartQuarantine())
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		_, err = e.TryLock(context.Background(), "k")
		if !errors.Is(err, api.ErrQuorumUnreachable) {
			t.Fatalf("TryLock on silent masters: %v, want ErrQuorumUnreachable", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "master timeout (50ms") || !strings.Contains(msg, "WithMasterTimeout") {
			t.Fatalf("TryLock on silent masters does not name the master timeout: %v", err)
		}
	})
}
