package transport_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
)

func TestCheckFor(t *testing.T) {
	const ttl = time.Second
	full := transport.Fencing | transport.MultiKey
	for _, tc := range []struct {
		name string
		op   transport.Op
		need transport.Capabilities
	}{
		{"acquire", transport.Op{Kind: transport.Acquire, Key: "k", Value: "v", TTL: ttl}, 0},
		{"release", transport.Op{Kind: transport.Release, Key: "k", Value: "v"}, 0},
		{"extend", transport.Op{Kind: transport.Extend, Key: "k", Value: "v", TTL: ttl}, 0},
		{"acquire one key in Keys", transport.Op{Kind: transport.Acquire, Key: "k", Keys: []string{"k"}, Value: "v", TTL: ttl}, 0},
		{"acquire-fenced", transport.Op{Kind: transport.AcquireFenced, Key: "k", Value: "v", TTL: ttl}, transport.Fencing},
		{"raise-fence", transport.Op{Kind: transport.RaiseFence, Key: "k", Value: "v", Token: 1}, transport.Fencing},
		{"multi acquire", transport.Op{Kind: transport.Acquire, Key: "a", Keys: []string{"a", "b"}, Value: "v", TTL: ttl}, transport.MultiKey},
		{"multi release", transport.Op{Kind: transport.Release, Key: "a", Keys: []string{"a", "b"}, Value: "v"}, transport.MultiKey},
		{"multi extend", transport.Op{Kind: transport.Extend, Key: "a", Keys: []string{"a", "b"}, Value: "v", TTL: ttl}, transport.MultiKey},
	} {
		if got := transport.Needs(&tc.op); got != tc.need {
			t.Errorf("%s: Needs = %v, want %v", tc.name, got, tc.need)
		}
		for _, have := range []transport.Capabilities{0, transport.Fencing, transport.MultiKey, full} {
			err := transport.CheckFor(&tc.op, have)
			if want := !have.Has(tc.need); errors.Is(err, errors.ErrUnsupported) != want || (!want && err != nil) {
				t.Errorf("%s with %v: CheckFor = %v, want unsupported=%v", tc.name, have, err, want)
			}
		}
	}
	// A malformed op is malformed whatever the transport lacks.
	bad := transport.Op{Kind: transport.AcquireFenced, Key: "k", Value: "v"}
	if err := transport.CheckFor(&bad, 0); !errors.Is(err, transport.ErrInvalidOp) || errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CheckFor(fenced op with ttl 0, none) = %v, want ErrInvalidOp only", err)
	}
}

func TestCapabilitiesString(t *testing.T) {
	for c, want := range map[transport.Capabilities]string{
		0:                                      "none",
		transport.Fencing:                      "fencing",
		transport.MultiKey:                     "multi-key",
		transport.Fencing | transport.MultiKey: "fencing+multi-key",
		transport.Fencing | 1<<7:               "fencing+0x80",
	} {
		if got := c.String(); got != want {
			t.Errorf("%#x.String() = %q, want %q", uint32(c), got, want)
		}
	}
}
