package redis

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/transport"
)

// The batch encodes its commands itself; radix's own Cmd encoding of the
// same arguments is the reference.
func TestBatchEncodingMatchesRadix(t *testing.T) {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	keys := []string{"a", "bb", "c:ç"}
	cases := []struct {
		op   transport.Op
		args []string
	}{
		{acq("k", "v", 1500*time.Millisecond), []string{"SET", "k", "v", "NX", "PX", "1500"}},
		{acq("k2", "v2", 10*time.Second), []string{"SET", "k2", "v2", "NX", "PX", "10000"}},
		{rel("key", "value"), []string{"EVALSHA", releaseSHA, "1", "key", "value"}},
		{ext("key", "value", time.Minute), []string{"EVALSHA", extendSHA, "1", "key", "value", "60000"}},
		{transport.Op{Kind: transport.AcquireFenced, Key: "f", Value: "v", TTL: time.Second},
			[]string{"EVALSHA", scripts[scriptAcquireFenced].sha, "2", "f", transport.FenceKey("f"), "v", "1000"}},
		{transport.Op{Kind: transport.RaiseFence, Key: "f", Value: "owner-1", Token: 1234567890123},
			[]string{"EVALSHA", scripts[scriptRaiseFence].sha, "1", transport.FenceKey("f"), "1234567890123", "owner-1"}},
		{transport.Op{Kind: transport.Acquire, Key: keys[0], Keys: keys, Value: "v", TTL: 2 * time.Second},
			append(append([]string{"EVALSHA", scripts[scriptAcquireMulti].sha, "3"}, keys...), "v", ms(2*time.Second))},
		{transport.Op{Kind: transport.Release, Key: keys[0], Keys: keys, Value: "v"},
			append(append([]string{"EVALSHA", scripts[scriptReleaseMulti].sha, "3"}, keys...), "v")},
		{transport.Op{Kind: transport.Extend, Key: keys[0], Keys: keys, Value: "v", TTL: time.Second},
			append(append([]string{"EVALSHA", scripts[scriptExtendMulti].sha, "3"}, keys...), "v", "1000")},
	}
	// All in one batch, as the engine sends them, so that the ttl cache and
	// the buffer's growth are exercised too.
	b := getBatch(len(cases) + 1)
	var want bytes.Buffer
	for i, c := range cases {
		if err := transport.Check(&c.op); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		b.add(&c.op, i)
		if err := resp3.Marshal(&want, radix.Cmd(nil, c.args[0], c.args[1:]...), resp.NewOpts()); err != nil {
			t.Fatal(err)
		}
	}
	b.addScriptLoad(scriptRelease)
	if err := resp3.Marshal(&want, radix.Cmd(nil, "SCRIPT", "LOAD", ReleaseScript), resp.NewOpts()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.buf, want.Bytes()) {
		t.Fatalf("encoded\n%q\nwant\n%q", b.buf, want.Bytes())
	}
	if len(b.replies) != len(cases)+1 || b.index[len(cases)] != -1 {
		t.Fatalf("%d receivers, last answers %d; want %d, the last for no op", len(b.replies), b.index[len(b.replies)-1], len(cases)+1)
	}
}

// appendLen writes every length as strconv does, across its fast paths'
// edges.
func TestAppendLen(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 11, 42, 99, 100, 101, 999, 1000, 65535, 1 << 20} {
		if got, want := string(appendLen([]byte("x"), n)), "x"+strconv.Itoa(n); got != want {
			t.Errorf("appendLen(%d) = %q, want %q", n, got, want)
		}
	}
}
