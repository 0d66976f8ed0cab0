package actors

import "github.com/asynkron/protoactor-go/actor"

// loop is a coordinator's dispatcher: one goroutine that lives as long as
// the coordinator and runs its mailbox each time the mailbox wakes, instead
// of protoactor's default dispatcher, which starts a goroutine per wake
// (`go fn()`). At 256 lockers a coordinator wakes about once per reply
// batch; the start (newproc) and the end (goexit0, gdestroy) of those
// goroutines were about 3 % of the CPU on the memory masters
// (BENCHMARKS.md, "In-memory masters, round 5"). The wake-up itself stays:
// a hand-over on a channel instead of a new goroutine's first run.
//
// One slot is enough: the mailbox schedules only on its idle-to-running
// edge, so while a wake is pending in the slot (the mailbox is running,
// not yet run) it schedules nothing more, and the goroutine takes the
// slot's wake before it can be scheduled again. It is the mailbox's only
// caller (protoactor's dispatchers are asked by mailboxes only).
type loop struct {
	wake chan func()
	done chan struct{}
}

var _ actor.Dispatcher = (*loop)(nil)

func newLoop() *loop {
	l := &loop{wake: make(chan func(), 1), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *loop) run() {
	defer close(l.done)
	for fn := range l.wake {
		if fn == nil {
			return // stop
		}
		fn()
	}
}

// Schedule hands fn to the goroutine. Only after stop can the slot be
// full (a wake left unrun: the coordinator has stopped, so its messages
// would be dropped anyway); then fn runs as the default dispatcher would
// run it, on a goroutine of its own.
func (l *loop) Schedule(fn func()) {
	select {
	case l.wake <- fn:
	default:
		go fn()
	}
}

// Throughput is the default dispatcher's: messages per run before the
// mailbox yields the thread.
func (l *loop) Throughput() int { return 300 }

// stop ends the goroutine once it has run what was handed to it, and
// waits for it. The coordinator must have stopped.
func (l *loop) stop() {
	l.wake <- nil
	<-l.done
}
