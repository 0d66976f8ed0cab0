package redis

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/mediocregopher/radix/v4/resp"
)

// fuzzReplies are the replies a master may send to the transport's
// commands (SET NX PX, EVALSHA of the lock scripts, SCRIPT LOAD, ASKING, and
// what INFO, PEXPIRE or DEL would answer), in RESP2 and RESP3, errors
// included: the common ones the one-pass read knows and every kind it must
// leave to the general path.
var fuzzReplies = []string{
	"+OK\r\n", "$-1\r\n", ":1\r\n", ":0\r\n", // the common four
	"_\r\n", "*-1\r\n", "$0\r\n\r\n",
	":12\r\n", ":-1\r\n", ":2\r\n", ":10\r\n", ":9223372036854775807\r\n",
	"+OKAY\r\n", "+QUEUED\r\n", "+O\r\n", "+\r\n",
	"-ERR wrong number of arguments\r\n",
	"-NOSCRIPT No matching script. Please use EVAL.\r\n",
	"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.\r\n",
	"-LOADING Redis is loading the dataset in memory\r\n",
	"-MOVED 3999 127.0.0.1:6381\r\n", "-ASK 3999 127.0.0.1:6381\r\n",
	"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
	"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
	"-READONLY You can't write against a read only replica.\r\n",
	"!21\r\nSYNTAX invalid syntax\r\n",
	"$1\r\n1\r\n", "$2\r\nOK\r\n", "$40\r\n0123456789012345678901234567890123456789\r\n",
	"$60\r\n# Server\r\nredis_version:7.0.15\r\nrun_id:abcdef\r\nuptime:12\r\n\r\n",
	"=15\r\ntxt:Some string\r\n",
	"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n", "*0\r\n", "*1\r\n+OK\r\n", "*3\r\n:1\r\n:0\r\n$-1\r\n",
	"%1\r\n+k\r\n:1\r\n", "~2\r\n:1\r\n:0\r\n", ">2\r\n+pubsub\r\n:1\r\n",
	",1.5\r\n", ",inf\r\n", "#t\r\n", "#f\r\n", "(3492890328409238509324850943850943825024385\r\n",
	"|1\r\n+ttl\r\n:3\r\n+OK\r\n",
	// A group script's bitmask (formMask), and numbers it must refuse.
	":4503599627370495\r\n", ":123456789012345678\r\n", ":\r\n", ":1a\r\n", ":7\r",
}

// chunkReader hands out its bytes in reads of the given lengths (then the
// rest), as a socket might.
type chunkReader struct {
	s    string
	cuts []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.s) == 0 {
		return 0, io.EOF
	}
	k := len(c.s)
	if len(c.cuts) > 0 {
		k = min(k, int(c.cuts[0])+1)
		c.cuts = c.cuts[1:]
	}
	k = copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

// decodeOutcome is what a decode left: each reply, the batch's error, and
// where the reader stopped.
func decodeOutcome(replies []reply, err error, br *bufio.Reader) string {
	var s strings.Builder
	for j, r := range replies {
		fmt.Fprintf(&s, "%d: form %d ok %v n %d err %T %v\n", j, r.form, r.ok, r.n, r.err, r.err)
	}
	fmt.Fprintf(&s, "batch err: %v\n", err)
	rest, _ := io.ReadAll(br)
	fmt.Fprintf(&s, "rest: %q\n", rest)
	return s.String()
}

// FuzzDecodeBuffered: for any sequence of replies (script: two bytes a
// reply, the command's form and the reply sent), arriving in reads cut
// anywhere (cuts: one byte a read's length) into a reader buffer of any
// size from 16 bytes (the same for both), a batch decoded by the one-pass read plus its fallback
// (batch.UnmarshalRESP) ends exactly as the per-reply path does over the
// whole stream (reply.UnmarshalRESP one by one): every reply's ok, count
// and error, the batch's error, and the reader at the byte after the batch.
func FuzzDecodeBuffered(f *testing.F) {
	f.Add([]byte{1, 0, 2, 2, 1, 1, 2, 3}, []byte{}, uint16(4096))
	f.Add([]byte{1, 0, 1, 0, 1, 0, 2, 2, 2, 3}, []byte{4, 0, 2, 7}, uint16(16))
	f.Add([]byte{1, 0, 2, 17, 2, 2, 1, 18, 1, 1}, []byte{3, 3, 3, 3, 3, 3}, uint16(32))
	f.Add([]byte{1, 4, 2, 31, 3, 29, 0, 30, 2, 2}, []byte{0, 1, 2, 3, 4, 5, 6}, uint16(20))
	f.Add([]byte{2, 35, 2, 36, 1, 37, 2, 38, 1, 41, 2, 42, 2, 44, 1, 0}, []byte{9, 1}, uint16(64))
	f.Add([]byte{1, 0, 2, 2, 1, 19, 2, 20, 3, 3, 1, 1}, []byte{5, 4, 4, 100}, uint16(17))
	f.Add([]byte{2, 2, 2, 7, 2, 10, 2, 3, 2, 8, 1, 9, 2, 1}, []byte{}, uint16(4096))
	f.Fuzz(func(t *testing.T, script, cuts []byte, size uint16) {
		if len(script) > 512 {
			return
		}
		var wire strings.Builder
		var forms []replyForm
		for i := 0; i+1 < len(script); i += 2 {
			forms = append(forms, replyForm(script[i]%5))
			wire.WriteString(fuzzReplies[int(script[i+1])%len(fuzzReplies)])
		}
		if len(forms) == 0 {
			return
		}
		const next = "+NEXT\r\n"
		all := wire.String() + next
		o := resp.NewOpts()

		b := getBatch(len(forms))
		for _, fm := range forms {
			b.push(0, fm)
		}
		size = max(16, size)
		br := bufio.NewReaderSize(&chunkReader{s: all, cuts: cuts}, int(size))
		err := b.UnmarshalRESP(br, o)
		got := decodeOutcome(b.replies, err, br)

		want := make([]reply, len(forms))
		// The same buffer size: a line longer than the buffer fails the
		// general path (bufio.ErrBufferFull) as it must fail the batch.
		wbr := bufio.NewReaderSize(strings.NewReader(all), int(size))
		var werr error
		for j, fm := range forms {
			want[j] = reply{form: fm}
		}
		for j := range want {
			if werr = want[j].UnmarshalRESP(wbr, o); werr != nil {
				break
			}
		}
		if exp := decodeOutcome(want, werr, wbr); got != exp {
			t.Fatalf("wire %q, cuts %v, buffer %d:\ngot\n%swant\n%s", all, cuts, size, got, exp)
		}
	})
}
