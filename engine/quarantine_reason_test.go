package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

var errInfoRefused = errors.New("INFO refused by the server's ACL")

// infoRefused reaches its master, but its ServerInfo always fails.
type infoRefused struct {
	transport.Transport
	name string
}

func (t infoRefused) Name() string  { return t.name }
func (t infoRefused) Epoch() uint64 { return 0 }
func (t infoRefused) ServerInfo(context.Context) (transport.ServerInfo, error) {
	return transport.ServerInfo{}, errInfoRefused
}

// A master whose process cannot be checked does not vote, and the error
// says why the check failed, so that the user can fix it (an ACL, a wrapper
// around a transport that reports nothing).
func TestQuarantineSaysWhyTheCheckFailed(t *testing.T) {
	var ts []transport.Transport
	for _, name := range []string{"a", "b", "c"} {
		ts = append(ts, infoRefused{memory.New().Transport(), name})
	}
	e, err := engine.NewWithTransports(ts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.TryLock(context.Background(), "k")
	if !errors.Is(err, api.ErrQuorumUnreachable) {
		t.Fatalf("TryLock with no master checkable: %v, want ErrQuorumUnreachable", err)
	}
	if !strings.Contains(err.Error(), errInfoRefused.Error()) {
		t.Fatalf("TryLock's error does not say why the masters could not be checked: %v", err)
	}
}
