package floor

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailbox is the engine's kind of mailbox (actors/mailbox.go), cut to what
// the skeleton uses: protoactor's default mailbox allocates a closure each
// time an idle mailbox is scheduled (the method value m.processMessages);
// this one makes it once. System messages first, the dispatcher's
// throughput honoured.
type mailbox struct {
	user, sys  queue
	status     atomic.Int32
	userN      atomic.Int32
	sysN       atomic.Int32
	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func()
}

func newMailbox() actor.Mailbox {
	m := &mailbox{}
	m.process = m.processMessages
	return m
}

func (m *mailbox) PostUserMessage(msg any) {
	m.user.push(msg)
	m.userN.Add(1)
	m.schedule()
}

func (m *mailbox) PostSystemMessage(msg any) {
	m.sys.push(msg)
	m.sysN.Add(1)
	m.schedule()
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

func (m *mailbox) Start()                {}
func (m *mailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *mailbox) schedule() {
	if m.status.CompareAndSwap(0, 1) {
		m.dispatcher.Schedule(m.process)
	}
}

func (m *mailbox) processMessages() {
	for {
		m.run()
		m.status.Store(0)
		if m.sysN.Load() == 0 && m.userN.Load() == 0 {
			return
		}
		if !m.status.CompareAndSwap(0, 1) {
			return
		}
	}
}

func (m *mailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
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
				case *actor.SuspendMailbox, *actor.ResumeMailbox:
					// The skeleton's actors never fail, so never suspend.
				default:
					m.invoker.InvokeSystemMessage(msg)
				}
				continue
			}
		}
		if msg = m.user.pop(); msg == nil {
			return
		}
		m.userN.Add(-1)
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
