package rueidistransport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/quorumlock/redlock/transport"
)

// Do sends the valid ops as one DoMulti and fills results; invalid ops get
// their transport.Check error and are not sent. Scripts go as EVALSHA; the
// ops that meet NOSCRIPT (the master restarted, or someone ran SCRIPT FLUSH)
// go again as EVAL in one more round trip, if that keeps the batch's order.
func (t *Transport) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	if n := len(ops); len(results) != n {
		return transport.Fail(results[:min(n, len(results))],
			fmt.Errorf("%w: Do got %d ops and %d results, want as many of each", transport.ErrInvalidOp, n, len(results)))
	}
	if t.closed.Load() {
		return transport.Fail(results, t.errClosed)
	}
	b := batchPool.Get().(*batch)
	epoch := t.epoch.Load()
	loading := t.loaded.Load() != epoch
	if loading {
		// A new connection has none of our scripts: load them at the head
		// of its first batch, so that its EVALSHAs find them.
		for _, sc := range allScripts {
			b.cmds = append(b.cmds, t.client.B().ScriptLoad().Script(sc.src).Build())
			b.index = append(b.index, -1)
		}
	}
	for i := range ops {
		results[i] = transport.Result{}
		// CheckFor, not Check: ops of a capability this transport does not
		// declare (the read-write ops) are answered ErrUnsupported, unsent.
		if err := transport.CheckFor(&ops[i], t.Capabilities()); err != nil {
			results[i].Err = err
			continue
		}
		b.cmds = append(b.cmds, t.command(&ops[i], false))
		b.index = append(b.index, i)
	}
	if len(b.cmds) == 0 || b.index[len(b.index)-1] < 0 {
		b.release()
		return nil
	}
	if err := ctx.Err(); err != nil {
		defer b.release()
		return t.failSent(b, results, fmt.Errorf("rueidis %s: not sent: %w", t.name, err))
	}
	if t.dialing() {
		defer b.release()
		return t.failSent(b, results, t.errDown)
	}
	ctx, cancel := t.withDeadline(ctx)
	defer cancel()

	replies := t.doMulti(ctx, b.cmds)
	loaded := loading
	for j, r := range replies {
		if err := r.NonRedisError(); err != nil {
			// One queue entry: the whole batch failed, and any op of it
			// may have been applied. b is dropped, not pooled: rueidis
			// may still hold b.cmds in its queue, to write them later.
			return t.failSent(b, results, t.callErr(ctx, err))
		}
		i := b.index[j]
		switch {
		case i < 0:
			loaded = loaded && r.Error() == nil
		case isNoScript(r):
			b.retry = append(b.retry, j)
		default:
			results[i] = t.result(&ops[i], r)
		}
	}
	if loaded && t.epoch.Load() == epoch {
		t.loaded.Store(epoch)
	}
	if len(b.retry) > 0 {
		t.resend(ctx, b, ops, results)
	}
	b.release()
	return nil
}

// doMulti is the one place the transport calls rueidis for a batch.
func (t *Transport) doMulti(ctx context.Context, cmds []rueidis.Completed) []rueidis.RedisResult {
	e0 := t.epoch.Load()
	replies := t.client.DoMulti(ctx, cmds...)
	t.settle(e0)
	return replies
}

// failSent sets err on every op b carries, and returns it.
func (t *Transport) failSent(b *batch, results []transport.Result, err error) error {
	for _, i := range b.index {
		if i >= 0 {
			results[i] = transport.Result{Err: err}
		}
	}
	return err
}

// resend runs the NOSCRIPT ops of b.retry again, as EVAL (which also loads
// the script for the next EVALSHA).
//
// Ops of a batch apply in slice order, and a resent op runs after all of
// the first pass. So an op goes again only if no later op of the batch that
// ran touches one of its keys; otherwise it fails, not applied. Resending
// it anyway could turn the engine's [Release(k, v), Acquire(k, v)] (one
// attempt's cleanup, the next attempt's SET, with one value) into SET then
// DEL: an Acquire reported OK over a key that is gone. The engine treats
// the failure like any other and sends the release again later.
func (t *Transport) resend(ctx context.Context, b *batch, ops []transport.Op, results []transport.Result) {
	again := b.inOrder(ops)
	for _, j := range b.retry {
		if !slices.Contains(again, j) {
			i := b.index[j]
			results[i] = t.opErr(&ops[i], errNotResent)
		}
	}
	if len(again) == 0 {
		return
	}
	cmds := make([]rueidis.Completed, len(again))
	for n, j := range again {
		cmds[n] = t.command(&ops[b.index[j]], true)
	}
	replies := t.doMulti(ctx, cmds)
	for n, r := range replies {
		i := b.index[again[n]]
		if err := r.NonRedisError(); err != nil {
			results[i] = transport.Result{Err: t.callErr(ctx, err)}
			continue
		}
		results[i] = t.result(&ops[i], r)
	}
}

// inOrder returns the positions in b.retry whose ops may run again without
// overtaking a later op of their keys: it walks the first pass from the end,
// noting the keys of the ops that ran (any reply but NOSCRIPT: an error
// reply may still have been applied). A fencing counter counts as its lock's
// key, so a RaiseFence and an AcquireFenced of one key meet.
func (b *batch) inOrder(ops []transport.Op) []int {
	clear(b.ran)
	var again []int
	next := len(b.retry) - 1
	for j := len(b.index) - 1; j >= 0 && b.index[j] >= 0; j-- {
		op := &ops[b.index[j]]
		if next >= 0 && b.retry[next] == j {
			next--
			if !b.touched(op) {
				again = append(again, j)
			}
			continue
		}
		if len(op.Keys) == 0 {
			b.ran[op.Key] = struct{}{}
		}
		for _, k := range op.Keys {
			b.ran[k] = struct{}{}
		}
	}
	slices.Reverse(again)
	return again
}

func (b *batch) touched(op *transport.Op) bool {
	if len(op.Keys) == 0 {
		_, hit := b.ran[op.Key]
		return hit
	}
	return slices.ContainsFunc(op.Keys, func(k string) bool {
		_, hit := b.ran[k]
		return hit
	})
}

func isNoScript(r rueidis.RedisResult) bool {
	re, ok := rueidis.IsRedisErr(r.Error())
	return ok && re.IsNoScript()
}

// command builds the command of a valid op: SET NX PX for a single-key
// Acquire, else EVALSHA of its script (EVAL when eval is set).
func (t *Transport) command(op *transport.Op, eval bool) rueidis.Completed {
	cmd := t.client.B()
	sc := scriptFor(op)
	if sc == nil {
		return cmd.Set().Key(op.Key).Value(op.Value).Nx().PxMilliseconds(op.TTL.Milliseconds()).Build()
	}
	var (
		keyBuf, argBuf [2]string
		keys           = keyBuf[:1]
		args           = argBuf[:1]
	)
	keys[0], args[0] = op.Key, op.Value
	switch {
	case len(op.Keys) > 1:
		keys = op.Keys
	case op.Kind == transport.AcquireFenced:
		keys = append(keys, transport.FenceKey(op.Key))
	case op.Kind == transport.RaiseFence:
		keys[0] = transport.FenceKey(op.Key)
		args = append(args[:0], strconv.FormatInt(op.Token, 10), op.Value)
	}
	if op.Kind == transport.Acquire || op.Kind == transport.Extend || op.Kind == transport.AcquireFenced {
		args = append(args, strconv.FormatInt(op.TTL.Milliseconds(), 10))
	}
	if eval {
		return cmd.Eval().Script(sc.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return cmd.Evalsha().Sha1(sc.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// result reads the master's reply to op. Only a reply that means "no" gives
// OK false with a nil Err: SET NX's nil, a script's 0, AcquireFenced's nil.
// Anything else that is not a "yes" is an Err.
func (t *Transport) result(op *transport.Op, r rueidis.RedisResult) transport.Result {
	err := r.Error()
	setLike := op.Kind == transport.AcquireFenced || (op.Kind == transport.Acquire && len(op.Keys) <= 1)
	switch {
	case rueidis.IsRedisNil(err) && setLike:
		return transport.Result{} // the key was held
	case rueidis.IsRedisNil(err):
		return t.opErr(op, errUnexpected)
	case err != nil:
		return t.opErr(op, err)
	case op.Kind == transport.Acquire && len(op.Keys) <= 1:
		if s, err := r.ToString(); err != nil || s != "OK" {
			return t.opErr(op, errUnexpected)
		}
		return transport.Result{OK: true}
	}
	n, err := r.ToInt64()
	switch {
	case err != nil:
		return t.opErr(op, errUnexpected)
	case op.Kind == transport.AcquireFenced && n < 1:
		return t.opErr(op, errBadToken)
	case op.Kind == transport.AcquireFenced:
		return transport.Result{OK: true, Token: n}
	case n == 1:
		return transport.Result{OK: true}
	case n == 0:
		return transport.Result{}
	}
	return t.opErr(op, errUnexpected)
}

// opErr is op's Result for err; a master's error reply is marked as one
// (transport.Reply), so the engine says that the master refused the
// command, not that it did not answer.
func (t *Transport) opErr(op *transport.Op, err error) transport.Result {
	if _, ok := rueidis.IsRedisErr(err); ok {
		err = transport.Reply(err)
	}
	return transport.Result{Err: fmt.Errorf("rueidis %s: %s %q: %w", t.name, op.Kind, op.Key, err)}
}

var (
	// errNotResent fails a NOSCRIPT op that cannot run again in order.
	// It wraps transport.ErrNotApplied, so the engine sends an Unlock's
	// release that failed so again later.
	errNotResent = fmt.Errorf("NOSCRIPT, and not resent: a later op of the batch on the same key had run already: %w", transport.ErrNotApplied)
	// errUnexpected: a reply of a type the op cannot have.
	errUnexpected = errors.New("unexpected reply")
	// errBadToken: AcquireFenced set the key but the count came out below
	// 1. The lock may be held, so this is an error, never a plain "no".
	errBadToken = errors.New("fencing counter is not positive")
)
