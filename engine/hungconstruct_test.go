package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// hungMaster is a silentMaster (mastertimeout_msg_test.go) that reports
// on its server, or would: its ServerInfo waits for its context too.
type hungMaster struct {
	silentMaster
	name string
}

func (h hungMaster) Name() string  { return h.name }
func (h hungMaster) Epoch() uint64 { return 0 }
func (h hungMaster) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	<-ctx.Done()
	return transport.ServerInfo{}, ctx.Err()
}

// The constructor's check for two entries of one server asks every master
// for its run id. Once a majority has answered, it waits for the rest no
// longer than the master timeout: a master that hangs is checked by its node
// at run time instead (TestTwinsFoundAtRunTimeDoNotVote), and must not hold
// up every engine's start (each redlock run's) for a second.
func TestConstructorDoesNotWaitForHungMasters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := []transport.Transport{
			memory.NewNamed("a").Transport(), memory.NewNamed("b").Transport(), memory.NewNamed("c").Transport(),
			hungMaster{silentMaster{memory.New().Transport()}, "d"}, hungMaster{silentMaster{memory.New().Transport()}, "e"},
		}
		start := time.Now()
		e, err := engine.NewWithTransports(ts, api.WithMasterTimeout(100*time.Millisecond), api.WithoutRestartQuarantine())
		took := time.Since(start) // the bubble's clock: exact
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if took > 100*time.Millisecond {
			t.Fatalf("NewWithTransports took %v with two of five masters hung: it waited for their run ids after three had answered", took)
		}
	})
}
