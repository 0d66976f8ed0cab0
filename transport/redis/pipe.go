package redis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/internal/iotrace"
	"github.com/quorumlock/redlock/transport"
)

// pipe is one connection to a master whose I/O the transport owns: a caller
// writes its batch's bytes itself, on its own goroutine, and one reader
// goroutine per connection reads the replies in order and hands each batch
// its outcome.
//
// Why not radix's Conn: its EncodeDecode hands every call to a writer
// goroutine and then to a reader goroutine, and since it does not honour a
// deadline for a call queued behind a reply that never comes, the transport
// ran each batch on a goroutine of its own as well: four goroutine hand-offs
// and a goroutine start per batch, ten batches per lock cycle with five
// masters. Here a batch costs one write on the caller's goroutine and one
// hand-off from the reader back to it (BENCHMARKS.md, "Round 2").
//
// Order: a batch's entry joins the queue and its bytes go out under one
// lock, so the queue's order is the wire's, and replies, which Redis sends
// in order, meet their batch. A caller whose context ends stops waiting,
// but its entry stays: the reader still reads its replies (into receivers
// the caller must not reuse), so the stream stays in step. A batch is
// written before send returns or never: it cannot reach the master after a
// batch its caller sends next.
type pipe struct {
	nc   net.Conn
	br   *bufio.Reader
	opts *resp.Opts

	wmu       writeLock      // held while a caller queues its entry and writes (wlock.go)
	fragile   bool           // a write's timeout breaks nc for good (timeoutBreaks)
	finishing sync.WaitGroup // finishWrite goroutines

	// With flushEvery > 0 (Config.WriteFlushInterval), batches collect in
	// wbuf and go out together flushEvery after the first of them.
	flushEvery time.Duration
	wbuf       []byte
	flushing   bool

	qmu    sync.Mutex
	ring   []pending // entries awaiting replies: ring[head], ... (n of them)
	head   int
	n      int
	err    error // set once the connection failed; later calls fail at once
	exited chan struct{}

	broken func(error) // told once when the connection fails

	// got counts the bytes the reader has taken from the socket, used
	// those it has decoded and handed out (stored after each batch's
	// hand-off); got > used: the reader holds undecoded bytes (see send).
	// Only the reader writes them.
	got, used atomic.Int64
}

// heldReader is the reader's source: the connection, counting in got the
// bytes that left the socket for the reader's buffer.
type heldReader struct{ p *pipe }

func (r heldReader) Read(b []byte) (int, error) {
	if testReadHook != nil {
		testReadHook(r.p)
	}
	n, err := r.p.nc.Read(b)
	if n > 0 {
		r.p.got.Add(int64(n))
	}
	return n, err
}

// pending is a batch awaiting its replies: u reads all of them, done gets
// the outcome (nil, a resp.ErrConnUsable, or the connection's error).
type pending struct {
	u     resp.Unmarshaler
	done  chan<- error
	trace *iotrace.Late // only while an iotrace hook is set
}

// readBufSize is the reader's buffer: a batch's replies (512 ops of a few
// bytes each, at most) usually arrive in one read(2).
const readBufSize = 64 << 10

func newPipe(nc net.Conn, flushEvery time.Duration, broken func(error)) *pipe {
	p := &pipe{
		nc:         nc,
		flushEvery: flushEvery,
		br:         nil, // below: its source needs p
		opts:       resp.NewOpts(),
		ring:       make([]pending, 8),
		exited:     make(chan struct{}),
		broken:     broken,
		wmu:        newWriteLock(),
		fragile:    timeoutBreaks(nc),
	}
	p.br = bufio.NewReaderSize(heldReader{p}, readBufSize)
	go p.read()
	return p
}

// errNotSent and errWriteCut fail a batch whose write met its deadline
// (context.DeadlineExceeded, whether or not the timer behind the caller's
// context has fired yet): not written at all (it waited for the write lock
// until then, or its write took nothing), or only in part (the rest is
// written after it, and its outcome is unknown). Only the first is
// transport.ErrNotSent: the master has seen nothing of it.
var (
	errNotSent  = fmt.Errorf("%w (never written): %w", transport.ErrNotSent, context.DeadlineExceeded)
	errWriteCut = fmt.Errorf("written only in part before its deadline: %w", context.DeadlineExceeded)
)

// errUnsolicited: the master sent a reply no batch asked for.
var errUnsolicited = errors.New("reply without a request")

func (p *pipe) read() {
	defer close(p.exited)
	for {
		if testReaderHook != nil {
			testReaderHook(p)
		}
		// Wait for a reply before looking for its batch: the batch joined
		// the queue before its bytes went out, so it is there by now.
		if _, err := p.br.Peek(1); err != nil {
			p.fail(err)
			return
		}
		p.qmu.Lock()
		if p.n == 0 {
			p.qmu.Unlock()
			// A server that refuses a connection (maxclients, protected
			// mode) says why at once and closes it: pass its words on.
			// Only a whole error line already read: never wait here.
			var said resp.ErrConnUsable
			if b, _ := p.br.Peek(p.br.Buffered()); len(b) > 0 && b[0] == '-' && bytes.IndexByte(b, '\n') > 0 &&
				errors.As(resp3.Unmarshal(p.br, nil, p.opts), &said) {
				p.fail(fmt.Errorf("%w: the server said %v", errUnsolicited, said.Err))
				return
			}
			p.fail(errUnsolicited)
			return
		}
		e := p.ring[p.head]
		p.qmu.Unlock()
		err := e.u.UnmarshalRESP(p.br, p.opts)
		if e.trace != nil {
			e.trace.Read.Store(time.Now().UnixNano())
		}
		if err != nil && !errors.As(err, new(resp.ErrConnUsable)) {
			p.fail(err) // e is still queued: it gets the error too
			return
		}
		p.qmu.Lock()
		p.ring[p.head] = pending{}
		p.head = (p.head + 1) % len(p.ring)
		p.n--
		p.qmu.Unlock()
		e.done <- err
		// After the hand-off: a batch that sees used pass its mark finds
		// its reply on done, if it was among the bytes decoded.
		p.used.Store(p.got.Load() - int64(p.br.Buffered()))
	}
}

// fail ends the connection's life: every queued batch gets err, later ones
// fail at once, and the transport learns it must reconnect.
func (p *pipe) fail(err error) {
	p.qmu.Lock()
	if p.err != nil {
		p.qmu.Unlock()
		return
	}
	p.err = err
	for i := range p.n {
		j := (p.head + i) % len(p.ring)
		p.ring[j].done <- err
		p.ring[j] = pending{}
	}
	p.n = 0
	p.qmu.Unlock()
	p.broken(err)
}

// push queues e; qmu is held.
func (p *pipe) push(e pending) {
	if p.n == len(p.ring) {
		ring := make([]pending, 2*len(p.ring))
		for i := range p.n {
			ring[i] = p.ring[(p.head+i)%len(p.ring)]
		}
		p.ring, p.head = ring, 0
	}
	p.ring[(p.head+p.n)%len(p.ring)] = e
	p.n++
}

// send writes buf, whose replies u reads, and waits for them or for ctx.
// done must have room for one value, and after an error u and done may
// still be used by the reader: the caller must not reuse them.
func (p *pipe) send(ctx context.Context, buf []byte, u resp.Unmarshaler, done chan error) error {
	var tr *iotrace.Late
	if iotrace.On() {
		tr = new(iotrace.Late)
		tr.Deadline, _ = ctx.Deadline()
	}
	if err := p.write(ctx, buf, u, done, tr); err != nil {
		return err
	}
	if tr != nil {
		tr.Written = time.Now()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// A reply that came just as ctx ended still counts.
		select {
		case err := <-done:
			return err
		default:
		}
		// So does one that had reached this host by then: waiting in the
		// socket, unread, or in the reader's buffer, read but not decoded.
		// On a CPU-starved client the reader may not have run yet (Go polls
		// the network when a P is idle or from sysmon, while timers fire
		// on every round), or may have been preempted between two batches'
		// replies, or the whole process may stall for longer than any fixed
		// grace; failing the batch would report a healthy master as
		// unreachable. So the batch waits until the reader has decoded
		// every byte that had arrived when ctx ended: if its reply was
		// among them it counts, and otherwise the master was late and the
		// batch fails. Counting it is safe: a grant's validity counts from
		// the send, so a late reply only shortens the lock. A master that
		// had sent nothing undecoded costs no wait at all; lateReplyCap
		// bounds the wait for one whose reply stopped half way.
		arrived := p.got.Load() + int64(p.unread())
		used := p.used.Load()
		if tr != nil {
			tr.Stage, tr.InSocket, tr.InBuffer = iotrace.AwaitingReply, arrived > p.got.Load(), p.got.Load() > used
			defer func() {
				if tr != nil { // nil: the late wait got the reply
					tr.Failed = time.Now()
					iotrace.Report(tr)
				}
			}()
		}
		if arrived > used {
			if testLateHook != nil {
				testLateHook()
			}
			if ok, err := p.awaitReader(done, arrived); ok {
				tr = nil
				return err
			}
		}
		return ctx.Err()
	}
}

// awaitReader waits for done until the reader has handed out every byte up
// to arrived (checking every lateReplyWait) or for lateReplyCap, and
// reports done's value if it came.
func (p *pipe) awaitReader(done chan error, arrived int64) (bool, error) {
	tick := time.NewTicker(lateReplyWait)
	defer tick.Stop()
	limit := time.NewTimer(lateReplyCap)
	defer limit.Stop()
	for {
		select {
		case err := <-done:
			return true, err
		case <-limit.C:
			return false, nil
		case <-tick.C:
			if testLateTick != nil {
				testLateTick()
			}
			if p.used.Load() >= arrived {
				// The reader stores used after its hand-off, so a reply
				// among the bytes it covers is on done now.
				select {
				case err := <-done:
					return true, err
				default:
					return false, nil
				}
			}
		}
	}
}

// lateReplyWait is how often a batch whose context ended, waiting for a
// reader that is behind (see send), checks whether the reader has caught
// up; lateReplyCap bounds that wait. Variables only so that a test can hold
// the reader longer than one check.
var (
	lateReplyWait = 10 * time.Millisecond
	lateReplyCap  = 2 * time.Second
)

func (p *pipe) write(ctx context.Context, buf []byte, u resp.Unmarshaler, done chan error, tr *iotrace.Late) error {
	err := p.wmu.lockCtx(ctx)
	unlock := err == nil
	defer func() {
		if unlock {
			p.wmu.Unlock()
		}
	}()
	// The caller may have waited for the lock: a batch whose caller gave up
	// is never written.
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if tr != nil {
			tr.Stage, tr.Failed = iotrace.WaitingToWrite, time.Now()
			iotrace.Report(tr)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return errNotSent // nothing of it was written
		}
		return err
	}
	p.qmu.Lock()
	if err := p.err; err != nil {
		p.qmu.Unlock()
		return err
	}
	p.push(pending{u: u, done: done, trace: tr})
	p.qmu.Unlock()
	if p.flushEvery > 0 {
		// Order holds: wbuf goes out in the order batches joined it, and
		// a later batch joins after this one.
		p.wbuf = append(p.wbuf, buf...)
		if !p.flushing {
			p.flushing = true
			time.AfterFunc(p.flushEvery, p.flush)
		}
		return nil
	}
	if testWriteHook != nil {
		testWriteHook()
	}
	// A write that cannot finish by the caller's deadline (a master that
	// stopped reading, its socket buffer full) must not hold the caller.
	dl, _ := ctx.Deadline()
	if err := p.nc.SetWriteDeadline(dl); err != nil {
		p.abort(err)
		return err
	}
	n, err := p.nc.Write(buf)
	if tr != nil && err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		tr.Stage, tr.Failed = iotrace.Write, time.Now()
		iotrace.Report(tr)
	}
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrDeadlineExceeded):
		// Part of the batch may be on the wire, and its entry is queued:
		// the stream is out of step, so the connection goes.
		p.abort(err)
		return err
	case n == 0 && p.fragile:
		// Not sent, but the connection is broken (TLS): it goes, and the
		// transport reconnects, as after any failed write (review17).
		p.abort(err)
		return errNotSent
	case n == 0:
		// Nothing went out (on a starved machine the deadline can pass
		// before the write even starts): the batch was never sent. Its
		// entry, the last queued since we hold wmu, leaves the queue,
		// and the connection stays.
		p.qmu.Lock()
		if p.err == nil {
			p.n--
			p.ring[(p.head+p.n)%len(p.ring)] = pending{}
		}
		p.qmu.Unlock()
		return errNotSent
	default:
		// Part went out: the rest must follow before anything else, or
		// the stream is out of step. It goes in the background, still
		// under wmu, so no later batch overtakes it; the caller stops
		// waiting now, and its replies are read when they come.
		unlock = false
		p.finishing.Add(1)
		go p.finishWrite(buf[n:])
		return errWriteCut
	}
}

// finishWrite writes the rest of a batch whose caller's deadline cut its
// write short, with no deadline, then lets the next batch write. wmu is held
// (handed over by write).
func (p *pipe) finishWrite(rest []byte) {
	defer p.finishing.Done()
	defer p.wmu.Unlock()
	if err := p.nc.SetWriteDeadline(time.Time{}); err != nil {
		p.abort(err)
		return
	}
	if _, err := p.nc.Write(rest); err != nil {
		p.abort(err)
	}
}

// flush writes the batches collected in wbuf.
func (p *pipe) flush() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.flushing = false
	if err := p.nc.SetWriteDeadline(time.Time{}); err != nil {
		p.abort(err)
		return
	}
	if _, err := p.nc.Write(p.wbuf); err != nil {
		p.abort(err)
	}
	p.wbuf = p.wbuf[:0]
}

// abort closes the connection after a failed write; the reader then fails
// every queued batch.
func (p *pipe) abort(err error) {
	p.broken(err)
	_ = p.nc.Close()
}

// close closes the connection and waits for the reader, and any
// finishWrite, to stop.
func (p *pipe) close() {
	_ = p.nc.Close()
	<-p.exited
	p.finishing.Wait()
}

// command is one command or a few, encoded ahead, outside the batch path
// (connection set-up, PING, INFO): its replies are read as strings, or
// discarded, and the first error reply is kept.
type command struct {
	buf     []byte
	replies int
	out     *string // the first reply, when not nil
	rcv     any     // the first reply, when not nil and out is nil (Transport.Cmd)
	err     error   // the first error reply, with the command it answered
	names   []string
}

// cmd appends one command.
func (c *command) cmd(args ...string) *command {
	c.buf = appendHeader(c.buf, len(args))
	for _, a := range args {
		c.buf = appendBulk(c.buf, a)
	}
	c.replies++
	c.names = append(c.names, args[0])
	return c
}

func (c *command) UnmarshalRESP(br resp.BufferedReader, o *resp.Opts) error {
	for i := range c.replies {
		var into any
		if i == 0 && c.out != nil {
			into = c.out
		} else if i == 0 && c.rcv != nil {
			into = c.rcv
		}
		err := resp3.Unmarshal(br, into, o)
		var usable resp.ErrConnUsable
		switch {
		case err == nil:
		case errors.As(err, &usable):
			if c.err == nil {
				c.err = fmt.Errorf("%s: %w", c.names[i], usable.Err)
			}
		default:
			if c.err != nil {
				// The server's refusal (maxclients, protected mode)
				// before it closed the connection: what to fix.
				return fmt.Errorf("%w, then the connection failed: %w", c.err, err)
			}
			return err
		}
	}
	return nil
}

// run sends c on p and returns the first error: the connection's, ctx's, or
// the first error reply.
func (c *command) run(ctx context.Context, p *pipe) error {
	if err := p.send(ctx, c.buf, c, make(chan error, 1)); err != nil {
		return err
	}
	return c.err
}

// setup makes nc ready for batches, in one round trip: AUTH, SELECT and
// SCRIPT LOAD of every script, so that the EVALSHAs of the first batch find
// them.
func setup(ctx context.Context, p *pipe, r *resolved) error {
	c := new(command)
	switch {
	case r.Username != "":
		c.cmd("AUTH", r.Username, r.Password)
	case r.Password != "":
		c.cmd("AUTH", r.Password)
	}
	if r.DB != 0 {
		c.cmd("SELECT", fmt.Sprint(r.DB))
	}
	for _, sc := range scripts {
		c.cmd("SCRIPT", "LOAD", sc.src)
	}
	return c.run(ctx, p)
}

// keepAlive is what radix's Dialer set on every connection, kept so that a
// master that vanished without a FIN is noticed on an idle connection.
const keepAlive = 10 * time.Second
