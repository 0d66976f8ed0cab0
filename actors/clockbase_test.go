package actors

import (
	"testing"
	"time"
	"unsafe"

	"github.com/quorumlock/redlock/transport"
)

// An opRequest fits the 128-byte size class (two are allocated per cycle),
// and its deadline keeps the order of the times it came from.
func TestOpRequestDeadline(t *testing.T) {
	if s := unsafe.Sizeof(opRequest{}); s > 128 {
		t.Errorf("opRequest is %d bytes, want at most 128", s)
	}
	if sinceBase(time.Time{}) != 0 || expires(&opRequest{op: transport.Op{Kind: transport.Release}}) {
		t.Error("the zero time, or an opRequest made without a deadline, has one")
	}
	now := time.Now()
	a, b := sinceBase(now), sinceBase(now.Add(time.Nanosecond))
	if a <= 0 || b != a+1 {
		t.Errorf("sinceBase(now) = %d, one ns later %d", a, b)
	}
	if d := sinceBase(clockBase.Add(-time.Hour)); d != -int64(time.Hour) {
		t.Errorf("a deadline an hour before the base is %d", d)
	}
	if sinceBase(clockBase) != 1 {
		t.Error("a deadline at the base reads as none")
	}
}
