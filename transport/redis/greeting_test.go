package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport/redis"
)

// A server that refuses a connection says why in an error reply sent at
// once, before any request, and closes it: "-ERR max number of clients
// reached", or protected mode's "-DENIED ..." with the fix spelled out.
// The transport must pass that on, not the EOF or "reply without a request"
// that follow it, which read like a client bug. (Review redisops.)
func TestDialSaysWhyTheServerRefused(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	s.Do(t, nil, "CONFIG", "SET", "maxclients", "1")
	s.Client(t) // takes the only slot
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// With a password, the set-up sends AUTH, whose reply is the refusal;
	// without, the refusal may come before the set-up's first request.
	for _, addr := range []string{s.Addr, "redis://:pw@" + s.Addr} {
		for range 3 {
			tr, err := redis.Dial(ctx, redis.Config{Addr: addr})
			if tr != nil {
				tr.Close()
				t.Fatal("maxclients 1 did not refuse a second client")
			}
			if !strings.Contains(err.Error(), "max number of clients") {
				t.Fatalf("Dial %s: %v\nwant the server's reply: ERR max number of clients reached", addr, err)
			}
		}
	}
}
