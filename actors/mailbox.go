package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailbox is the mailbox of the engine's actors: protoactor's default
// mailbox (system messages first, suspend and resume, the dispatcher's
// throughput, a panic escalated to the supervisor) without the parts the
// engine does not use (middlewares, message batches), and with one change
// that matters on the hot path. protoactor's mailbox hands the dispatcher
// the method value m.processMessages each time an idle mailbox wakes, and
// that allocates a closure per wake: half of all the engine's allocations
// at 256 lockers, because a node actor on the synchronized dispatcher wakes
// for nearly every message. Here the closure is made once.
type mailbox struct {
	user queue
	sys  queue

	status    atomic.Int32 // idle or running
	userN     atomic.Int32
	sysN      atomic.Int32
	suspended atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func()

	// inline, if set (coordinators, see newCoordinatorMailbox), says which
	// user messages an idle mailbox runs on the sender's goroutine instead
	// of the dispatcher's (inlines).
	inline inlineRule

	// direct, if set, handles a user message instead of the invoker when
	// its handle reports true (bypass.go).
	direct *bypass

	// recovered, if set, learns of a panic in the actor, and the message
	// it lost, before protoactor restarts the actor (coordrestart.go).
	recovered func(reason, msg any)
}

const (
	idle int32 = iota
	running
)

func newMailbox() actor.Mailbox {
	m := &mailbox{}
	m.process = m.processMessages
	return m
}

var _ actor.Mailbox = (*mailbox)(nil)

func (m *mailbox) PostUserMessage(msg any) {
	// Asked before the push: once queued, msg is the receiver's (a reply
	// batch goes back to its pool when counted).
	in := m.inline != 0 && m.inline.inlines(msg)
	if in && m.status.CompareAndSwap(idle, running) {
		// This goroutine runs the mailbox. With nothing queued, msg is
		// the next message it would run, so it runs msg first, without
		// the round trip through the queue (its lock twice, and the
		// counter's two atomics) that every call paid. A message another
		// sender queues meanwhile finds the mailbox running and is run
		// after msg, by the loop below, as it would have been anyway.
		if m.userN.Load() == 0 && m.sysN.Load() == 0 && !m.suspended.Load() {
			m.processFrom(msg)
			return
		}
		m.user.push(msg)
		m.userN.Add(1)
		m.process()
		return
	}
	m.user.push(msg)
	m.userN.Add(1)
	if in {
		// The mailbox was running: queued after the check above, msg is
		// either seen by the goroutine running it or, if that goroutine
		// has just let go, run here.
		if m.status.CompareAndSwap(idle, running) {
			m.process()
		}
		return
	}
	m.schedule()
}

func (m *mailbox) PostSystemMessage(msg any) {
	m.sys.push(msg)
	m.sysN.Add(1)
	m.schedule()
}

// inlineRule is which user messages an idle mailbox runs on the sender's
// goroutine. A rule, not a func: the check runs for every message a
// coordinator gets, and a type switch here is cheaper than a call through
// a func value that calls another.
type inlineRule uint8

const (
	inlineNone    inlineRule = iota
	inlineReplies            // a reply batch of one reply (newCoordinatorMailbox)
	inlineCalls              // that, and every call (loneCallMailbox)
)

func (r inlineRule) inlines(msg any) bool {
	switch m := msg.(type) {
	case *nodeReplies:
		return len(m.items) == 1
	case *Call:
		return r == inlineCalls
	}
	return false
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
}

func (m *mailbox) Start() {}

func (m *mailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *mailbox) schedule() {
	if m.status.CompareAndSwap(idle, running) {
		m.dispatcher.Schedule(m.process)
	}
}

func (m *mailbox) processMessages() { m.processFrom(nil) }

// processFrom runs the mailbox, starting with first, a user message not
// queued, if not nil.
func (m *mailbox) processFrom(first any) {
	for {
		m.run(first)
		first = nil
		m.status.Store(idle)
		// A message posted after run saw an empty queue, but before the
		// store, found the mailbox running and did not schedule it: look
		// again, and run once more if it is ours to run.
		if m.sysN.Load() == 0 && (m.suspended.Load() || m.userN.Load() == 0) {
			return
		}
		if !m.status.CompareAndSwap(idle, running) {
			return // another sender scheduled it
		}
	}
}

func (m *mailbox) run(first any) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			if m.recovered != nil {
				m.recovered(r, msg)
			}
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		if m.sysN.Load() > 0 {
			if msg = m.sys.pop(); msg != nil {
				m.sysN.Add(-1)
				switch msg.(type) {
				case *actor.SuspendMailbox:
					m.suspended.Store(true)
				case *actor.ResumeMailbox:
					m.suspended.Store(false)
				default:
					m.invoker.InvokeSystemMessage(msg)
				}
				continue
			}
		}
		if m.suspended.Load() {
			if first != nil {
				// Suspended since processFrom's caller looked: first
				// waits in the queue, as if it had been queued.
				m.user.push(first)
				m.userN.Add(1)
			}
			return
		}
		if first != nil {
			msg, first = first, nil
		} else {
			// The count, not the queue, says whether a message waits:
			// a run that found nothing paid the queue's lock for it,
			// at the end of every run. A message pushed but not yet
			// counted is not missed: its sender counts it, then
			// schedules the mailbox, or finds it running and is seen
			// by processFrom's second look, which reads the count too.
			if m.userN.Load() == 0 {
				return
			}
			if msg = m.user.pop(); msg == nil {
				return
			}
			m.userN.Add(-1)
		}
		if m.direct != nil && m.direct.handle(msg) {
			continue
		}
		m.invoker.InvokeUserMessage(msg)
	}
}

// queue is an unbounded FIFO: a ring that doubles when full.
type queue struct {
	mu   sync.Mutex
	buf  []any
	head int
	n    int
}

func (q *queue) push(v any) {
	q.mu.Lock()
	if q.n == len(q.buf) {
		grown := make([]any, max(16, 2*len(q.buf)))
		k := copy(grown, q.buf[q.head:])
		copy(grown[k:], q.buf[:q.head])
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = v
	q.n++
	q.mu.Unlock()
}

func (q *queue) pop() any {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return nil
	}
	v := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	q.mu.Unlock()
	return v
}
