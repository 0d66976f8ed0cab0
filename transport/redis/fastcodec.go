package redis

import "github.com/mediocregopher/radix/v4/resp"

// decodeBuffered reads, from replies[j] on, the replies whose bytes are
// whole in br's buffer and of the common forms fastBytes knows, in one pass
// over the buffer and one Discard, and returns the index of the first reply
// it left to the general path (reply.UnmarshalRESP, which then reads it, and
// waits for the socket if its bytes are not all in yet). At 256 lockers a
// batch's replies nearly all arrive in one read, and reading them one by one
// through the reader's interface (Buffered, Peek, Discard per reply) cost
// about three times as much per reply (BenchmarkDecode; BENCHMARKS.md,
// "ceil17").
func (b *batch) decodeBuffered(br resp.BufferedReader, j int) int {
	n := br.Buffered()
	if n < 4 {
		return j
	}
	p, err := br.Peek(n) // no more than is buffered: never reads
	if err != nil {
		return j
	}
	off := 0
	for ; j < len(b.replies); j++ {
		k := b.replies[j].fastBytes(p[off:])
		if k == 0 {
			break
		}
		off += k
	}
	_, _ = br.Discard(off) // cannot fail: the bytes are buffered
	return j
}

// fastBytes is reply.fast over bytes in hand: if p starts with one of a
// lock cycle's common replies (+OK or a null to a SET NX, :1 or :0 to a
// release or extend script), whole, it sets r as the general decoder would
// and returns the reply's length; otherwise it returns 0 and leaves r as
// it was.
func (r *reply) fastBytes(p []byte) int {
	if len(p) < 4 {
		return 0
	}
	switch r.form {
	case formSet:
		if len(p) < 5 || p[4] != '\n' {
			return 0
		}
		switch string(p[:4]) {
		case "+OK\r":
			r.ok = true
		case "$-1\r":
			r.ok = false
		default:
			return 0
		}
		r.err = nil
		return 5
	case formFlag:
		if p[0] != ':' || (p[1] != '0' && p[1] != '1') || p[2] != '\r' || p[3] != '\n' {
			return 0
		}
		r.n = int64(p[1] - '0')
		r.ok, r.err = r.n == 1, nil
		return 4
	case formMask:
		// :<bits>\r\n, at most 16 digits (below 2^53).
		if p[0] != ':' {
			return 0
		}
		var n int64
		for k := 1; k < len(p) && k <= 17; k++ {
			c := p[k]
			switch {
			case c >= '0' && c <= '9':
				n = n*10 + int64(c-'0')
			case c == '\r' && k > 1 && k+1 < len(p) && p[k+1] == '\n':
				r.n, r.ok, r.err = n, n == 1, nil
				return k + 2
			default:
				return 0
			}
		}
	}
	return 0
}
