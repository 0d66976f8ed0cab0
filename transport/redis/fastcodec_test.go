package redis

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mediocregopher/radix/v4/resp"
)

// TestBatchDecodeMatchesPerReply: a batch of every decode case, its bytes
// arriving whole, one at a time, or in halves, decodes as each reply
// decoded alone by the general path does (slowUnmarshal), and leaves the
// reader at the byte after the batch. The one-pass read of the buffer
// (decodeBuffered) must hand a reply split across reads, or of a form it
// does not know, to the general path at the right offset.
func TestBatchDecodeMatchesPerReply(t *testing.T) {
	var wire strings.Builder
	var forms []replyForm
	// The common replies in runs, as at 256 lockers, with every odd case
	// between them.
	for _, c := range decodeCases {
		for _, common := range []string{"+OK\r\n", ":1\r\n", "$-1\r\n", ":0\r\n"} {
			wire.WriteString(common)
			if common[0] == ':' {
				forms = append(forms, formFlag)
			} else {
				forms = append(forms, formSet)
			}
		}
		wire.WriteString(c.wire)
		forms = append(forms, c.form)
	}
	const next = "+NEXT\r\n"
	all := wire.String() + next
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"halves":   iotest.HalfReader,
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			b := getBatch(len(forms))
			for _, f := range forms {
				b.push(0, f)
			}
			o := resp.NewOpts()
			br := bufio.NewReaderSize(wrap(strings.NewReader(all)), 64<<10)
			if err := b.UnmarshalRESP(br, o); err != nil {
				t.Fatalf("UnmarshalRESP: %v", err)
			}
			want := bufio.NewReader(strings.NewReader(all))
			for j, f := range forms {
				w := reply{form: f}
				if err := slowUnmarshal(&w, want, o); err != nil {
					t.Fatalf("reply %d: reference: %v", j, err)
				}
				g := b.replies[j]
				if g.ok != w.ok || g.n != w.n || (g.err == nil) != (w.err == nil) ||
					(g.err != nil && g.err.Error() != w.err.Error()) {
					t.Errorf("reply %d (form %d): got ok %v n %d err %v, want ok %v n %d err %v",
						j, f, g.ok, g.n, g.err, w.ok, w.n, w.err)
				}
			}
			if rest, _ := br.ReadString('\n'); rest != next {
				t.Errorf("after the batch the reader is at %q, want %q", rest, next)
			}
		})
	}
}

// fastBytes takes only whole replies: every proper prefix of a common
// reply is left to the general path, which waits for the rest.
func TestFastBytesNeedsWholeReply(t *testing.T) {
	for _, c := range []struct {
		form replyForm
		wire string
	}{{formSet, "+OK\r\n"}, {formSet, "$-1\r\n"}, {formFlag, ":1\r\n"}, {formFlag, ":0\r\n"}} {
		for i := range len(c.wire) {
			r := reply{form: c.form}
			if k := r.fastBytes([]byte(c.wire[:i])); k != 0 {
				t.Errorf("form %d, %q: took %d bytes of a partial reply", c.form, c.wire[:i], k)
			}
		}
		r := reply{form: c.form}
		if k := r.fastBytes([]byte(c.wire)); k != len(c.wire) {
			t.Errorf("form %d, %q: took %d bytes, want %d", c.form, c.wire, k, len(c.wire))
		}
	}
}
