package rueidistransport

import (
	"testing"

	"github.com/quorumlock/redlock/transport"
	radixtransport "github.com/quorumlock/redlock/transport/redis"
)

// TestSharesCountersWithRadixTransport: this transport's scripts are its
// own text, but they keep the data of the engine's radix transport (a
// fencing counter is a hash of count and owner), so engines on either
// transport can share masters. The ops alternate between the two
// transports on one key and counter.
func TestSharesCountersWithRadixTransport(t *testing.T) {
	s := startRedis(t)
	ours := newTransport(t, Config{Addr: s.Addr})
	cfg, err := radixtransport.ParseAddr(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := radixtransport.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()

	fenced := func(v string) transport.Op {
		return transport.Op{Kind: transport.AcquireFenced, Key: "k", Value: v, TTL: hold}
	}
	raise := func(token int64, v string) transport.Op {
		return transport.Op{Kind: transport.RaiseFence, Key: "k", Value: v, Token: token}
	}
	run := func(tr transport.Transport, op transport.Op) transport.Result {
		t.Helper()
		res := make([]transport.Result, 1)
		if err := tr.Do(t.Context(), []transport.Op{op}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}

	if r := run(ours, fenced("a")); !r.OK || r.Token != 1 {
		t.Fatalf("our AcquireFenced: %+v, want token 1", r)
	}
	wantOK(t, "radix: the owner confirms token 1", run(theirs, raise(1, "a")), true)
	wantOK(t, "radix: another value cannot confirm 1", run(theirs, raise(1, "b")), false)
	wantOK(t, "radix: release", run(theirs, rel("k", "a")), true)
	if r := run(theirs, fenced("c")); !r.OK || r.Token != 2 {
		t.Fatalf("radix AcquireFenced after ours: %+v, want token 2", r)
	}
	wantOK(t, "ours: the owner confirms token 2", run(ours, raise(2, "c")), true)
	wantOK(t, "ours: token 1 is below the count", run(ours, raise(1, "a")), false)
	wantOK(t, "ours: release of radix's lock", run(ours, rel("k", "c")), true)

	multi := transport.Op{Kind: transport.Acquire, Key: "m1", Keys: []string{"m1", "m2"}, Value: "v", TTL: hold}
	wantOK(t, "ours: multi-key acquire", run(ours, multi), true)
	multi.Kind = transport.Release
	wantOK(t, "radix: multi-key release", run(theirs, multi), true)
}
