package actors

import (
	"testing"

	"github.com/quorumlock/redlock/transport"
)

// A request goes back on the free list only once every answer it is owed
// has been counted, and only at the end of the Receive that counted the
// last: until then the coordinator hands out other requests. An answer
// more than it was owed (which no node sends) does not free it twice.
func TestRequestFreedAfterEveryAnswer(t *testing.T) {
	c := &coordinator{}
	r := c.newRequest()
	*r = opRequest{refs: 3, reply: true, op: transport.Op{Key: "k", Value: "v"}}
	c.answered(r)
	r.refs++ // sent again to a master (resendUnsent)
	c.answered(r)
	c.answered(r)
	if len(c.doneReqs) != 0 {
		t.Fatalf("freed with %d answers still owed", r.refs)
	}
	c.answered(r)
	if len(c.doneReqs) != 1 {
		t.Fatalf("not freed after its last answer (refs %d)", r.refs)
	}
	c.answered(r) // one too many: ignored
	if len(c.doneReqs) != 1 {
		t.Fatalf("freed twice: %d", len(c.doneReqs))
	}
	if got := c.newRequest(); got == r {
		t.Fatal("reused in the Receive that freed it")
	}
	c.freeDone()
	if got := c.newRequest(); got != r || got.refs != 0 || got.reply || got.op.Key != "" || got.op.Value != "" {
		t.Fatalf("the freed request is not reused, zeroed: %+v", *got)
	}
	var plain opRequest // a request not reused (refs 0) is never freed
	c.answered(&plain)
	if len(c.doneReqs) != 0 {
		t.Fatal("a request that is not reused was freed")
	}
}
