package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/internal/iotrace"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/internal/opkeys"
)

// Do sends the valid ops as one pipeline and fills results. Invalid ops get
// their transport.Check error and are not sent.
func (t *Transport) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	return t.do(ctx, ops, results, false)
}

// DoAsking is Do with every op preceded by ASKING: the Redis Cluster
// redirection for a key of a slot being imported by this node (an ASK
// reply elsewhere). ASKING holds for the next command only, and a batch is
// one contiguous write on the connection, so each op gets its own.
func (t *Transport) DoAsking(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	return t.do(ctx, ops, results, true)
}

func (t *Transport) do(ctx context.Context, ops []transport.Op, results []transport.Result, asking bool) error {
	if len(results) != len(ops) {
		err := fmt.Errorf("%w: %d ops but %d results", transport.ErrInvalidOp, len(ops), len(results))
		return transport.Fail(results[:min(len(ops), len(results))], err)
	}
	t.awaitFirst(ctx)
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
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return failValid(results, fmt.Errorf("redis %s: not sent: %w", t.name, err))
	}
	// A batch that reaches us after its deadline (whether or not the timer
	// behind ctx has run yet) was late on this side: the master has not
	// seen it. Say so (transport.ErrNotSent), so that the engine treats it
	// as overload, not as a master that did not answer.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		if iotrace.On() {
			iotrace.Report(&iotrace.Late{Stage: iotrace.BeforeWrite, Deadline: dl, Failed: time.Now()})
		}
		return failValid(results, fmt.Errorf("redis %s: %w", t.name, errLate))
	}
	ctx, cancel := t.withDeadline(ctx)
	defer cancel()

	b := getBatch(n)
	b.asking, b.clusterFence = asking, t.cfg.ClusterFenceKeys
	b.addAll(ops, results, t.cfg.Coalesce)
	if err := t.send(ctx, cs, b.buf, b, b.done); err != nil {
		// b is not put back: the reader may still read a late reply into it.
		return failValid(results, t.callErr(ctx, err))
	}
	b.retry = b.retry[:0]
	for j := range b.replies {
		i := b.index[j]
		r := &b.replies[j]
		if i == groupIndex {
			m := b.groupOps(j)
			if r.err != nil && isNoScript(r.err) {
				b.retry = append(b.retry, m...)
				continue
			}
			if r.err == nil && r.n>>len(m) != 0 {
				r.err = errUnexpectedReply // bits for keys it was not sent
			}
			for x, i := range m {
				results[i] = t.memberResult(&ops[i], r, x)
			}
			continue
		}
		if i < 0 {
			continue // ASKING's +OK
		}
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
// LOAD and this batch, someone ran SCRIPT FLUSH, or a proxy moved us to
// another server): it loads the scripts the ops in b.retry need and sends
// those ops again, in one more round trip. It reports whether b may be
// reused.
//
// Ops in a batch apply in slice order (the contract), and a resent op runs
// after every op of the first pass. So an op is resent only if no later op
// of the batch that ran touches one of its keys; ops of other keys commute
// with it. Otherwise it fails, not applied: resending it could turn the
// engine's [Release(k, v), Acquire(k, v)] (one attempt's cleanup and the
// next attempt's SET, which share a value) into SET, then DEL, and an
// Acquire reported OK over a key that is gone. The engine treats that
// failure like any other: the release is sent again in a later batch.
func (t *Transport) resendScripts(ctx context.Context, cs *connState, b *batch, ops []transport.Op, results []transport.Result) bool {
	var need uint32 // bit id: script id is needed
	for _, i := range b.retry {
		if id, ok := scriptOf(&ops[i]); ok {
			need |= 1 << id
		}
	}
	for j := range b.replies {
		if b.index[j] == groupIndex && b.replies[j].err != nil {
			// Its ops are resent one by one (with the single-key
			// scripts, in need already), but later batches will want
			// the group's script.
			need |= 1 << groupScript(ops[b.groupOps(j)[0]].Kind)
		}
	}
	b.retry = t.keepOrder(b, ops, results)
	b.reset(len(b.retry) + int(numScripts))
	for id := range numScripts {
		if need&(1<<id) != 0 {
			b.addScriptLoad(id)
		}
	}
	for _, i := range b.retry {
		b.add(&ops[i], i)
	}
	if err := t.send(ctx, cs, b.buf, b, b.done); err != nil {
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

// errNotResent fails a NOSCRIPT op that cannot be resent in order.
var errNotResent = fmt.Errorf("NOSCRIPT, and not resent: a later op of the batch on the same key had already run, and a resend would have run after it: %w", transport.ErrNotApplied)

// keepOrder returns the ops of b.retry (in op order) that may be resent,
// and fails the others with errNotResent. It walks the first pass
// backwards, in the order the master ran it, collecting the keys of the ops
// that ran (anything but NOSCRIPT counts as run: an error reply may still
// have been applied). A group of coalesced releases ran where it stands
// (addAll), all its releases at once. Ops are ordered by the keys they
// touch on the master (opkeys.Server).
func (t *Transport) keepOrder(b *batch, ops []transport.Op, results []transport.Result) []int {
	ran := make(map[string]struct{})
	keep := make([]int, 0, len(b.retry))
	for j := len(b.replies) - 1; j >= 0; j-- {
		if i := b.index[j]; i < 0 && i != groupIndex {
			continue // ASKING, SCRIPT LOAD
		}
		r := &b.replies[j]
		if r.err != nil && isNoScript(r.err) {
			for _, i := range b.groupOps(j) {
				if b.touches(&ops[i], ran) {
					results[i] = t.result(&ops[i], &reply{err: errNotResent})
					continue
				}
				keep = append(keep, i)
			}
			continue
		}
		for _, i := range b.groupOps(j) {
			for _, k := range opkeys.Server(&ops[i], b.fenceName) {
				ran[k] = struct{}{}
			}
		}
	}
	// Per key, the first pass ran in op order (addAll), so op order is the
	// order to resend in.
	slices.Sort(keep)
	return keep
}

func (b *batch) touches(op *transport.Op, keys map[string]struct{}) bool {
	for _, k := range opkeys.Server(op, b.fenceName) {
		if _, ok := keys[k]; ok {
			return true
		}
	}
	return false
}

// fenceName is key's fencing counter as this batch names it on the master.
func (b *batch) fenceName(key string) string {
	if b.clusterFence {
		return ClusterFenceKey(key)
	}
	return transport.FenceKey(key)
}

func (t *Transport) result(op *transport.Op, r *reply) transport.Result {
	if r.err != nil {
		if wrongType(op, r.err) {
			return transport.Result{}
		}
		return transport.Result{Err: t.opErr(op, r.err)}
	}
	res := transport.Result{OK: r.ok}
	if r.form == formToken && r.ok {
		res.Token = r.n
	}
	return res
}

// opErr is the Result.Err of op that failed with err: an error reply of the
// master is marked as one (transport.Reply).
func (t *Transport) opErr(op *transport.Op, err error) error {
	if isRespErr(err) {
		err = transport.Reply(err)
	}
	return fmt.Errorf("redis %s: %s %q: %w", t.name, op.Kind, op.Key, err)
}

// failValid sets err on every result that has none yet: the valid ops, since
// invalid ones keep their own error.
// errLate fails a batch that reached Do after its deadline.
var errLate = fmt.Errorf("%w: %w", transport.ErrNotSent, context.DeadlineExceeded)

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

// batch is the scratch for one Do: the batch's commands already encoded as
// RESP, a receiver per command, and which op each answers. Its bytes go out
// in one write and it reads every reply itself (UnmarshalRESP), so a batch
// costs no per-command Action, interface dispatch or argument slice:
// radix's Pipeline of Cmds spent about a fifth of the client's CPU encoding
// argument by argument. Batches are pooled, and put back only after a round
// trip answered in full: after an error the connection's reader may still
// read a late reply into the receivers.
type batch struct {
	buf     []byte
	replies []reply
	index   []int // replies[j] answers ops[index[j]]; -1 for SCRIPT LOAD
	retry   []int
	done    chan error

	// members lists the ops of each group of coalesced ops (a reply
	// with index groupIndex answers members[g0:g0+gn]); groups are the
	// open groups of Releases and of Extends while addAll encodes.
	members []int
	groups  [2]opGroup

	// asking precedes each op with ASKING (DoAsking); clusterFence names
	// the fencing counters with ClusterFenceKey (Config.ClusterFenceKeys).
	asking       bool
	clusterFence bool

	// The engine uses few distinct ttls, so the last one's decimal form is
	// kept rather than formatted per op.
	ttlMS  int64
	ttlBuf []byte
}

var batchPool = sync.Pool{New: func() any {
	return &batch{done: make(chan error, 1), ttlMS: -1}
}}

// maxPooledOps and maxPooledBytes keep a rare huge batch (many ops, or
// multi-key ops with long keys) from pinning its scratch in the pool.
const (
	maxPooledOps   = 4096
	maxPooledBytes = 1 << 20
)

func getBatch(n int) *batch {
	b := batchPool.Get().(*batch)
	b.reset(n)
	b.asking, b.clusterFence = false, false
	return b
}

func putBatch(b *batch) {
	if cap(b.replies) > maxPooledOps || cap(b.buf) > maxPooledBytes {
		return
	}
	batchPool.Put(b)
}

// reset empties b for n commands.
func (b *batch) reset(n int) {
	if cap(b.replies) < n {
		b.replies = make([]reply, 0, n)
		b.index = make([]int, 0, n)
	}
	b.replies = b.replies[:0]
	b.index = b.index[:0]
	b.members = b.members[:0]
	b.buf = b.buf[:0]
}

// UnmarshalRESP makes a batch the resp.Unmarshaler of its replies: it reads
// them in order. A reply's own error (a Redis
// error, an unexpected type) stays on its op; only an error of the
// connection stops the read, and fails the whole batch.
func (b *batch) UnmarshalRESP(br resp.BufferedReader, o *resp.Opts) error {
	for j := 0; j < len(b.replies); {
		if k := b.decodeBuffered(br, j); k > j {
			j = k
			continue
		}
		if err := b.replies[j].UnmarshalRESP(br, o); err != nil {
			return err
		}
		j++
	}
	return nil
}

// add appends op, which is valid, as one command answering ops[i].
func (b *batch) add(op *transport.Op, i int) {
	if b.asking {
		b.push(-1, formNone)
		b.buf = append(b.buf, cmdAsking...)
	}
	if len(op.Keys) > 1 {
		b.addMulti(op, i)
		return
	}
	if op.Kind.Shared() {
		b.addShared(op, i)
		return
	}
	switch op.Kind {
	case transport.Acquire:
		b.push(i, formSet)
		b.buf = append(b.buf, cmdSet...)
		b.buf = appendBulk(b.buf, op.Key)
		b.buf = appendBulk(b.buf, op.Value)
		b.buf = append(b.buf, argsNXPX...)
		b.buf = b.appendTTL(op)
	case transport.Release:
		b.push(i, formFlag)
		b.buf = append(b.buf, cmdRelease...)
		b.buf = appendBulk(b.buf, op.Key)
		b.buf = appendBulk(b.buf, op.Value)
	case transport.Extend:
		b.push(i, formFlag)
		b.buf = append(b.buf, cmdExtend...)
		b.buf = appendBulk(b.buf, op.Key)
		b.buf = appendBulk(b.buf, op.Value)
		b.buf = b.appendTTL(op)
	case transport.AcquireFenced:
		b.push(i, formToken)
		b.buf = appendEvalSHA(b.buf, scriptAcquireFenced, 2, 2)
		b.buf = appendBulk(b.buf, op.Key)
		b.buf = b.appendFenceKey(op.Key)
		b.buf = appendBulk(b.buf, op.Value)
		b.buf = b.appendTTL(op)
	case transport.RaiseFence:
		b.push(i, formFlag)
		b.buf = appendEvalSHA(b.buf, scriptRaiseFence, 1, 2)
		b.buf = b.appendFenceKey(op.Key)
		var n [20]byte
		b.buf = appendBulk(b.buf, strconv.AppendInt(n[:0], op.Token, 10))
		b.buf = appendBulk(b.buf, op.Value)
	}
}

// addMulti appends a multi-key Acquire, Release or Extend: EVALSHA sha n
// keys... value [ttl].
func (b *batch) addMulti(op *transport.Op, i int) {
	id, _ := scriptOf(op)
	argv := 2 // value, ttl
	if op.Kind == transport.Release {
		argv = 1
	}
	b.push(i, formFlag)
	b.buf = appendEvalSHA(b.buf, id, len(op.Keys), argv)
	for _, k := range op.Keys {
		b.buf = appendBulk(b.buf, k)
	}
	b.buf = appendBulk(b.buf, op.Value)
	if op.Kind != transport.Release {
		b.buf = b.appendTTL(op)
	}
}

// addScriptLoad appends SCRIPT LOAD of script id, whose reply answers no op.
func (b *batch) addScriptLoad(id scriptID) {
	b.push(-1, formNone)
	b.buf = appendHeader(b.buf, 3)
	b.buf = appendBulk(b.buf, "SCRIPT")
	b.buf = appendBulk(b.buf, "LOAD")
	b.buf = appendBulk(b.buf, scripts[id].src)
}

func (b *batch) push(i int, form replyForm) {
	b.replies = append(b.replies, reply{form: form})
	b.index = append(b.index, i)
}

func (b *batch) appendTTL(op *transport.Op) []byte {
	if ms := op.TTL.Milliseconds(); ms != b.ttlMS {
		b.ttlMS = ms
		b.ttlBuf = strconv.AppendInt(b.ttlBuf[:0], ms, 10)
	}
	return appendBulk(b.buf, b.ttlBuf)
}

// The fixed head of each single-key command, encoded once.
var (
	cmdSet     = appendBulk(appendHeader(nil, 6), "SET")
	argsNXPX   = appendBulk(appendBulk(nil, "NX"), "PX")
	cmdRelease = appendEvalSHA(nil, scriptRelease, 1, 1)
	cmdExtend  = appendEvalSHA(nil, scriptExtend, 1, 2)
	cmdAsking  = appendBulk(appendHeader(nil, 1), "ASKING")
)

func (b *batch) appendFenceKey(key string) []byte {
	if b.clusterFence {
		return appendBulk(b.buf, ClusterFenceKey(key))
	}
	return appendFenceKey(b.buf, key)
}

// appendEvalSHA appends the head of EVALSHA sha numkeys, for a command
// that then carries keys keys and argv arguments.
func appendEvalSHA(buf []byte, id scriptID, keys, argv int) []byte {
	buf = appendHeader(buf, 3+keys+argv)
	buf = appendBulk(buf, "EVALSHA")
	buf = appendBulk(buf, scripts[id].sha)
	var n [20]byte
	return appendBulk(buf, strconv.AppendInt(n[:0], int64(keys), 10))
}

func appendHeader(buf []byte, n int) []byte {
	buf = append(buf, '*')
	buf = appendLen(buf, n)
	return append(buf, '\r', '\n')
}

// appendBulk appends s as a RESP bulk string.
func appendBulk[S ~string | ~[]byte](buf []byte, s S) []byte {
	buf = append(buf, '$')
	buf = appendLen(buf, len(s))
	buf = append(buf, '\r', '\n')
	buf = append(buf, s...)
	return append(buf, '\r', '\n')
}

// appendLen appends n >= 0 in decimal. Lengths and counts of a lock's
// commands are nearly all below 100, and strconv.AppendInt was a third of
// the encoding's instructions (callgrind, BenchmarkEncode).
func appendLen(buf []byte, n int) []byte {
	switch {
	case n >= 0 && n < 10:
		return append(buf, byte('0'+n))
	case n >= 10 && n < 100:
		return append(buf, byte('0'+n/10), byte('0'+n%10))
	}
	return strconv.AppendInt(buf, int64(n), 10)
}

// appendFenceKey appends transport.FenceKey(key) as a bulk string without
// building the string.
func appendFenceKey(buf []byte, key string) []byte {
	buf = append(buf, '$')
	buf = strconv.AppendInt(buf, int64(len(transport.FencePrefix)+len(key)), 10)
	buf = append(buf, '\r', '\n')
	buf = append(buf, transport.FencePrefix...)
	buf = append(buf, key...)
	return append(buf, '\r', '\n')
}

// replyForm is the shape of reply a command gets.
type replyForm uint8

const (
	formNone  replyForm = iota // only an error matters (SCRIPT LOAD)
	formSet                    // SET NX: +OK, or null when the key exists
	formFlag                   // a script's integer: 1 is OK, 0 is not
	formToken                  // AcquireFencedScript: the count, or null when the key was held
	formMask                   // ReleaseBatchScript: a bit per key, 1 if deleted
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
	// g0, gn: the ops of a group reply (formMask), batch.members[g0:g0+gn].
	g0, gn int32
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
	if r.fast(br) {
		return nil
	}
	return r.wrap(r.unmarshal(br, o))
}

// fast reads the replies a lock cycle almost always gets, +OK or a null to
// a SET NX and :1 or :0 to a release or extend script, straight from the
// reader's buffer: at 256 lockers the general decoder (Peek, then radix's
// Unmarshal through interfaces) was most of the client's cost per reply.
// It looks only at bytes already buffered, so it never waits, and leaves
// anything else (a reply split across reads, an error, a longer number) to
// unmarshal, which reads it the same way (TestDecodeFastPath).
func (r *reply) fast(br resp.BufferedReader) bool {
	if br.Buffered() < 4 {
		return false
	}
	b, err := br.Peek(4)
	if err != nil {
		return false
	}
	switch r.form {
	case formSet:
		if br.Buffered() < 5 || (string(b) != "+OK\r" && string(b) != "$-1\r") {
			return false
		}
		if b, err = br.Peek(5); err != nil || b[4] != '\n' {
			return false
		}
		r.ok = b[0] == '+'
		_, _ = br.Discard(5) // cannot fail: the bytes are buffered
		return true
	case formFlag:
		if b[0] != ':' || (b[1] != '0' && b[1] != '1') || b[2] != '\r' || b[3] != '\n' {
			return false
		}
		r.n = int64(b[1] - '0')
		r.ok = r.n == 1
		_, _ = br.Discard(4)
		return true
	}
	return false
}

// wrap turns an op's own failure into r.err (see UnmarshalRESP).
func (r *reply) wrap(err error) error {
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
	case formFlag, formMask:
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
		if r.form == formMask && r.n < 0 {
			return resp.ErrConnUsable{Err: errUnexpectedReply}
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

// ClusterFencePrefix starts the fencing counter's name of a key without a
// hash tag on a Redis Cluster (ClusterFenceKey). Lock keys on a cluster must
// not start with it.
const ClusterFencePrefix = "redlock-fence{"

// ClusterFenceKey is the name of key's fencing counter on a Redis Cluster:
// in key's slot, so that the fenced scripts, which touch both, run on one
// shard. A key with a hash tag keeps transport.FenceKey(key), the
// single-server name (the prefix has no braces, so the counter shares the
// key's tag). Any other key's counter is ClusterFencePrefix + key + "}",
// whose tag is the whole key: a prefix of its own, since every name
// transport.FencePrefix + "{...}" is already the counter of the tagged key
// "{...}" (the counters of "k" and "{k}" would be one). That holds unless the
// key has a '}' and no tag: such a key cannot be fenced on a cluster (the
// cluster transport refuses it).
func ClusterFenceKey(key string) string {
	if HasHashTag(key) {
		return transport.FenceKey(key)
	}
	return ClusterFencePrefix + key + "}"
}

// HasHashTag reports whether key has a Redis Cluster hash tag: a '{'
// followed later by a '}' with at least one byte between them (the first
// '{', and the first '}' after it, count).
func HasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	return strings.IndexByte(key[i+1:], '}') > 0
}
