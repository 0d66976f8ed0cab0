package redis

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/mediocregopher/radix/v4/resp"
)

// decodeCases are replies as a master sends them, for every form, the
// common ones and the odd.
var decodeCases = []struct {
	form replyForm
	wire string
}{
	{formSet, "+OK\r\n"},
	{formSet, "$-1\r\n"},
	{formSet, "_\r\n"},
	{formSet, "+OKAY\r\n"},
	{formSet, "+QUEUED\r\n"},
	{formSet, "-ERR wrong\r\n"},
	{formSet, ":1\r\n"},
	{formFlag, ":1\r\n"},
	{formFlag, ":0\r\n"},
	{formFlag, ":7\r\n"},
	{formFlag, ":12\r\n"},
	{formFlag, ":-1\r\n"},
	{formFlag, "-NOSCRIPT No matching script\r\n"},
	{formFlag, "+OK\r\n"},
	{formFlag, "$1\r\n1\r\n"},
	{formToken, ":3\r\n"},
	{formToken, ":0\r\n"},
	{formToken, "$-1\r\n"},
	{formToken, "_\r\n"},
	{formMask, ":0\r\n"},
	{formMask, ":1\r\n"},
	{formMask, ":5\r\n"},
	{formMask, ":4503599627370495\r\n"},
	{formMask, ":123456789012345678\r\n"},
	{formMask, ":-1\r\n"},
	{formMask, ":\r\n"},
	{formMask, "-NOSCRIPT No matching script\r\n"},
	{formMask, "*2\r\n:1\r\n:0\r\n"},
	{formNone, "$40\r\n0123456789012345678901234567890123456789\r\n"},
}

// slowUnmarshal is the reference: the reply decoded without the fast path
// (fastUnmarshal), so the two must agree on every case.
func slowUnmarshal(r *reply, br resp.BufferedReader, o *resp.Opts) error {
	r.ok, r.err = false, nil
	return r.wrap(r.unmarshal(br, o))
}

// TestDecodeFastPath: the common replies read by fastUnmarshal come out as
// the general decoder reads them, and every case, common or odd, leaves the
// reader at the next reply (the marker after it).
func TestDecodeFastPath(t *testing.T) {
	for _, c := range decodeCases {
		var got, want reply
		got.form, want.form = c.form, c.form
		o := resp.NewOpts()
		br := bufio.NewReader(strings.NewReader(c.wire + "+NEXT\r\n"))
		errGot := got.UnmarshalRESP(br, o)
		rest, _ := br.ReadString('\n')
		br2 := bufio.NewReader(strings.NewReader(c.wire + "+NEXT\r\n"))
		errWant := slowUnmarshal(&want, br2, o)
		if (errGot == nil) != (errWant == nil) || got.ok != want.ok || got.n != want.n || (got.err == nil) != (want.err == nil) {
			t.Errorf("form %d %q: got ok %v n %d err %v (%v), want ok %v n %d err %v (%v)",
				c.form, c.wire, got.ok, got.n, got.err, errGot, want.ok, want.n, want.err, errWant)
		}
		if got.err != nil && want.err != nil && got.err.Error() != want.err.Error() {
			t.Errorf("form %d %q: error %q, want %q", c.form, c.wire, got.err, want.err)
		}
		if errGot == nil && rest != "+NEXT\r\n" {
			t.Errorf("form %d %q: the next reply reads %q, want +NEXT", c.form, c.wire, rest)
		}
	}
}

// BenchmarkDecode: a batch's replies as the engine gets them at 256
// lockers (half SET +OK, half release :1), decoded from memory: the
// client's CPU per reply, without the network.
func BenchmarkDecode(b *testing.B) {
	const n = 64
	var wire bytes.Buffer
	bt := getBatch(2 * n)
	for range n {
		wire.WriteString("+OK\r\n")
		bt.push(0, formSet)
	}
	for range n {
		wire.WriteString(":1\r\n")
		bt.push(0, formFlag)
	}
	src := bytes.NewReader(wire.Bytes())
	br := bufio.NewReaderSize(src, 64<<10)
	o := resp.NewOpts()
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(wire.Bytes())
		br.Reset(src)
		if err := bt.UnmarshalRESP(br, o); err != nil {
			b.Fatal(err)
		}
	}
	for j := range bt.replies {
		if !bt.replies[j].ok {
			b.Fatalf("reply %d not ok", j)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*n), "ns/reply")
}

// BenchmarkEncode: a batch of 64 SET NX PX and 64 releases encoded, as Do
// encodes them, without the network.
func BenchmarkEncode(b *testing.B) {
	ops := benchOps("redlock-bench:engine:18a2b3c4d5e6f7:u256:", 64)
	b.ReportAllocs()
	for b.Loop() {
		bt := getBatch(len(ops))
		for i := range ops {
			bt.add(&ops[i], i)
		}
		putBatch(bt)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ops)), "ns/op-encoded")
}
