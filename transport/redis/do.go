package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/transport"
)

// Do sends the valid ops as one pipeline and fills results. Invalid ops get
// their transport.Check error and are not sent.
func (t *Transport) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	if len(results) != len(ops) {
		err := fmt.Errorf("%w: %d ops but %d results", transport.ErrInvalidOp, len(ops), len(results))
		return transport.Fail(results[:min(len(ops), len(results))], err)
	}
	select {
	case <-t.firstDone:
	default:
		// A transport just made has not tried to connect yet: wait for that
		// first attempt (within ctx) rather than failing a batch sent right
		// after New. Later, while reconnecting, Do fails at once.
		select {
		case <-t.firstDone:
		case <-ctx.Done():
		}
	}
	cs, down, ok := t.enter()
	if !ok {
		return transport.Fail(results, t.errClosed)
	}
	defer t.inflight.Done()

	n := 0
	for i := range ops {
		if err := transport.Check(&ops[i]); err != nil {
			results[i] = transport.Result{Err: err}
			continue
		}
		results[i] = transport.Result{}
		n++
	}
	if n == 0 {
		return nil
	}
	if cs == nil {
		return failValid(results, down)
	}
	if err := ctx.Err(); err != nil {
		return failValid(results, fmt.Errorf("redis %s: not sent: %w", t.name, err))
	}
	ctx, cancel := t.withDeadline(ctx)
	defer cancel()

	b := getBatch(n)
	for i := range ops {
		if results[i].Err == nil {
			b.add(&ops[i], i)
		}
	}
	if err := t.send(ctx, cs, b.p, b.done); err != nil {
		// b is not put back: radix may still read a late reply into it.
		return failValid(results, t.callErr(ctx, err))
	}
	b.retry = b.retry[:0]
	for j := range b.replies {
		i := b.index[j]
		r := &b.replies[j]
		if r.err != nil && isNoScript(r.err) {
			b.retry = append(b.retry, i)
			continue
		}
		results[i] = t.result(&ops[i], r)
	}
	if len(b.retry) > 0 && !t.resendScripts(ctx, cs, b, ops, results) {
		return nil
	}
	putBatch(b)
	return nil
}

// resendScripts handles NOSCRIPT (the master restarted between our SCRIPT
// LOAD and this batch, or someone ran SCRIPT FLUSH): it loads the scripts
// and sends the ops in b.retry again, in one more round trip. It reports
// whether b may be reused.
//
// The resent ops keep their relative order, but now run after the batch's
// later plain SETs (the only ops that are not scripts), which may touch the
// same key; that is still safe. A release or extend (single or multi-key)
// only acts when the key holds this op's value, and values are unique per
// lock and never reused, so a late script either finds our own lock (and
// does what we asked a little later, as if the batch had been slower) or
// finds anything else and does nothing: it can never delete or extend
// someone else's lock. A late acquire (fenced or multi-key) and a plain SET
// it now follows may come out the other way round than in order (the SET
// sets the key, the acquire then finds it held), but each answer is true of
// the master when the op ran, so no lock is reported that is not held. A
// late RaiseFence only ever raises.
func (t *Transport) resendScripts(ctx context.Context, cs *connState, b *batch, ops []transport.Op, results []transport.Result) bool {
	var need uint32 // bit id: script id is needed
	for _, i := range b.retry {
		if id, ok := scriptOf(&ops[i]); ok {
			need |= 1 << id
		}
	}
	b.reset(len(b.retry) + int(numScripts))
	for id := range numScripts {
		if need&(1<<id) != 0 {
			b.addCmd(-1, formNone, "SCRIPT", "LOAD", scripts[id].src)
		}
	}
	for _, i := range b.retry {
		b.add(&ops[i], i)
	}
	if err := t.send(ctx, cs, b.p, b.done); err != nil {
		err = t.callErr(ctx, err)
		for _, i := range b.retry {
			results[i] = transport.Result{Err: err}
		}
		return false
	}
	var loadErr error
	for j := range b.replies {
		r := &b.replies[j]
		if i := b.index[j]; i >= 0 {
			if r.err != nil && loadErr != nil {
				r.err = fmt.Errorf("%w (after SCRIPT LOAD failed: %w)", r.err, loadErr)
			}
			results[i] = t.result(&ops[i], r)
		} else if r.err != nil {
			loadErr = r.err
		}
	}
	return true
}

func (t *Transport) result(op *transport.Op, r *reply) transport.Result {
	if r.err != nil {
		return transport.Result{Err: fmt.Errorf("redis %s: %s %q: %w", t.name, op.Kind, op.Key, r.err)}
	}
	res := transport.Result{OK: r.ok}
	if r.form == formToken && r.ok {
		res.Token = r.n
	}
	return res
}

// failValid sets err on every result that has none yet: the valid ops, since
// invalid ones keep their own error.
func failValid(results []transport.Result, err error) error {
	for i := range results {
		if results[i].Err == nil {
			results[i] = transport.Result{Err: err}
		}
	}
	return err
}

func isNoScript(err error) bool {
	var se resp3.SimpleError
	return errors.As(err, &se) && strings.HasPrefix(se.S, "NOSCRIPT")
}

// batch is the scratch for one Do: the pipeline, a receiver per command and
// the commands' arguments. Batches are pooled, and put back only after a
// round trip answered in full: after an error radix may still read a late
// reply into the receivers.
type batch struct {
	p       *radix.Pipeline
	replies []reply
	index   []int // replies[j] answers ops[index[j]]; -1 for SCRIPT LOAD
	args    []string
	retry   []int
	done    chan error

	// The engine uses few distinct ttls, so the last one's decimal form is
	// kept rather than formatted (and allocated) per op.
	ttlMS  int64
	ttlStr string
}

var batchPool = sync.Pool{New: func() any {
	return &batch{p: radix.NewPipeline(), done: make(chan error, 1), ttlMS: -1}
}}

// maxPooledOps keeps a rare huge batch from pinning its scratch in the pool.
const maxPooledOps = 4096

func getBatch(n int) *batch {
	b := batchPool.Get().(*batch)
	b.reset(n)
	return b
}

func putBatch(b *batch) {
	if cap(b.replies) > maxPooledOps {
		return
	}
	batchPool.Put(b)
}

// reset empties b for n commands. replies must not grow while commands are
// appended: each command holds a pointer into it.
func (b *batch) reset(n int) {
	b.p.Reset()
	if cap(b.replies) < n {
		b.replies = make([]reply, 0, n)
		b.index = make([]int, 0, n)
	}
	b.replies = b.replies[:0]
	b.index = b.index[:0]
	if cap(b.args) < 5*n {
		b.args = make([]string, 0, 5*n)
	}
	b.args = b.args[:0]
}

// add appends op, which is valid, as one command answering ops[i].
func (b *batch) add(op *transport.Op, i int) {
	if len(op.Keys) > 1 {
		b.addMulti(op, i)
		return
	}
	switch op.Kind {
	case transport.Acquire:
		b.addCmd(i, formSet, "SET", op.Key, op.Value, "NX", "PX", b.ms(op))
	case transport.Release:
		b.addCmd(i, formFlag, "EVALSHA", releaseSHA, "1", op.Key, op.Value)
	case transport.Extend:
		b.addCmd(i, formFlag, "EVALSHA", extendSHA, "1", op.Key, op.Value, b.ms(op))
	case transport.AcquireFenced:
		b.addCmd(i, formToken, "EVALSHA", scripts[scriptAcquireFenced].sha, "2",
			op.Key, transport.FenceKey(op.Key), op.Value, b.ms(op))
	case transport.RaiseFence:
		b.addCmd(i, formFlag, "EVALSHA", scripts[scriptRaiseFence].sha, "1",
			transport.FenceKey(op.Key), strconv.FormatInt(op.Token, 10))
	}
}

// addMulti appends a multi-key Acquire, Release or Extend: EVALSHA sha n
// keys... value [ttl].
func (b *batch) addMulti(op *transport.Op, i int) {
	id, _ := scriptOf(op)
	start := len(b.args)
	b.args = append(b.args, scripts[id].sha, strconv.Itoa(len(op.Keys)))
	b.args = append(b.args, op.Keys...)
	b.args = append(b.args, op.Value)
	if op.Kind != transport.Release {
		b.args = append(b.args, b.ms(op))
	}
	b.push(i, formFlag, "EVALSHA", start)
}

// addCmd appends a command whose reply is read in form. args is copied into
// b.args, so that the variadic slice does not escape and allocate per
// command.
func (b *batch) addCmd(i int, form replyForm, cmd string, args ...string) {
	start := len(b.args)
	b.args = append(b.args, args...)
	b.push(i, form, cmd, start)
}

// push appends cmd with the arguments b.args[start:]. b.args may have been
// reallocated by the appends since the batch's earlier commands: they keep
// the old array, whose contents do not change, so that is safe.
func (b *batch) push(i int, form replyForm, cmd string, start int) {
	b.replies = append(b.replies, reply{form: form})
	b.index = append(b.index, i)
	b.p.Append(radix.Cmd(&b.replies[len(b.replies)-1], cmd, b.args[start:len(b.args):len(b.args)]...))
}

func (b *batch) ms(op *transport.Op) string {
	ms := op.TTL.Milliseconds()
	if ms != b.ttlMS {
		b.ttlMS, b.ttlStr = ms, strconv.FormatInt(ms, 10)
	}
	return b.ttlStr
}

// replyForm is the shape of reply a command gets.
type replyForm uint8

const (
	formNone  replyForm = iota // only an error matters (SCRIPT LOAD)
	formSet                    // SET NX: +OK, or null when the key exists
	formFlag                   // a script's integer: 1 is OK, 0 is not
	formToken                  // AcquireFencedScript: the count, or null when the key was held
)

// reply receives one command's reply. It is a resp.Unmarshaler so that a
// Redis error reply lands on its own op: radix's pipeline would otherwise
// return only the first command's error, formatted into one error for the
// whole pipeline, with no way to tell which commands it hit.
type reply struct {
	form replyForm
	ok   bool
	err  error
	n    int64
}

var (
	errUnexpectedReply = errors.New("unexpected reply")
	// errBadToken: AcquireFencedScript set the key, but the counter came out
	// below 1 (someone wrote a negative number there). The lock may be
	// held, so this is an error, never a plain "no".
	errBadToken = errors.New("fencing counter is not positive")
)

func (r *reply) UnmarshalRESP(br resp.BufferedReader, o *resp.Opts) error {
	r.ok, r.err = false, nil
	err := r.unmarshal(br, o)
	if err == nil {
		return nil
	}
	// ErrConnUsable means the reply was consumed whole (an error reply, or
	// one of a type we did not expect): only this op failed and the rest of
	// the pipeline reads on. Anything else is the connection's failure.
	var usable resp.ErrConnUsable
	if errors.As(err, &usable) {
		r.err = usable.Err
		return nil
	}
	return err
}

func (r *reply) unmarshal(br resp.BufferedReader, o *resp.Opts) error {
	switch r.form {
	case formSet:
		// Every RESP message is at least 3 bytes, so this cannot wait for
		// bytes that are not coming.
		b, err := br.Peek(3)
		if err != nil {
			return err
		}
		switch {
		case string(b) == "+OK":
			r.ok = true
		case isNull(b):
			// NX found the key: a definite "no".
		default:
			return discardUnexpected(br, o)
		}
		return resp3.Unmarshal(br, nil, o)
	case formFlag:
		b, err := br.Peek(1)
		if err != nil {
			return err
		}
		if b[0] != byte(resp3.NumberPrefix) {
			return discardUnexpected(br, o)
		}
		// Into a field, not a local: a local's address passed as any would
		// escape and cost an allocation per op.
		if err := resp3.Unmarshal(br, &r.n, o); err != nil {
			return err
		}
		r.ok = r.n == 1
		return nil
	case formToken:
		b, err := br.Peek(3)
		if err != nil {
			return err
		}
		switch {
		case isNull(b):
			// The key was held: a definite "no", and no count.
			return resp3.Unmarshal(br, nil, o)
		case b[0] != byte(resp3.NumberPrefix):
			return discardUnexpected(br, o)
		}
		if err := resp3.Unmarshal(br, &r.n, o); err != nil {
			return err
		}
		if r.n < 1 {
			return resp.ErrConnUsable{Err: errBadToken}
		}
		r.ok = true
		return nil
	default:
		return resp3.Unmarshal(br, nil, o)
	}
}

// isNull reports whether the first 3 bytes of a reply are a null: RESP2's
// null bulk string or RESP3's null.
func isNull(b []byte) bool {
	return string(b) == "$-1" || b[0] == byte(resp3.NullPrefix)
}

// discardUnexpected consumes a reply of a type the op cannot have: an error
// reply comes back as itself, anything else as errUnexpectedReply, both
// wrapped in ErrConnUsable since the reply was read whole.
func discardUnexpected(br resp.BufferedReader, o *resp.Opts) error {
	if err := resp3.Unmarshal(br, nil, o); err != nil {
		return err
	}
	return resp.ErrConnUsable{Err: errUnexpectedReply}
}
