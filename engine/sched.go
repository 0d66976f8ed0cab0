package engine

import (
	"sync"
	"time"
)

// sched is the engine's one timer for every watched lock (issue 13, held
// locks): a min-heap of the locks by their next event (the next
// auto-extension, or Until), one runtime timer armed for the earliest, and
// a line of due auto-extensions that wait for a slot.
//
// It replaces a timer per lock, whose callback ran on a goroutine of its
// own at every event and, for an auto-extension, then waited parked for a
// slot (autoslots.go). A round of n locks falling due together cost n
// goroutines made runnable at one instant, on a client that may be short of
// CPU, and each lock carried its timer, the method value it called and an
// entry in the engine's live-lock map (about 170 bytes). Here a due lock
// costs an entry in the heap (16 bytes) and, past the slots, a place in the
// line; a goroutine runs only for an extension that is out, and one that
// finishes takes the next in line itself.
//
// Lock order: a lock's sig before mu; sched never takes a lock's sig or mu
// while it holds mu.
type sched struct {
	mu    sync.Mutex
	base  time.Time    // the times in heap count from here (monotonic)
	heap  []schedEntry // min-heap by at; entry i's lock has hidx i+1
	timer *time.Timer  // armed for heap[0] unless firing; made at the first put
	armed bool         // timer is set, for armedAt
	// armedAt is when timer fires; a put earlier than it resets the timer.
	armedAt time.Duration
	firing  bool    // a fire is draining the due locks; it re-arms when done
	due     []*lock // fire's chunk of due locks, reused

	// lmu guards the line and the workers, apart from the heap: a worker
	// that finishes an extension takes the next under lmu alone, so the
	// slots' traffic does not queue behind fire's pops or the heap's moves
	// (nor they behind it). Never held with mu.
	lmu sync.Mutex
	// line holds due auto-extensions, in the order they fell due, while
	// out is at limit; line[head:] are waiting.
	line  []*lock
	head  int
	out   int // auto-extensions out, each on its worker goroutine
	limit int // at most this many out at once (autoslots.go)
	// work, made once: a go statement with arguments, or with a method
	// and its receiver, allocates a closure per goroutine started.
	work func()
	// closed is set by Close under mu: from then on put refuses, so a lock
	// is either collected by Close or never enters the heap.
	closed bool
	// stopping is set by Close under lmu, after closed: from then on no
	// worker starts, so running counts every worker Close must wait for.
	stopping bool
	// running counts the fires and workers under way. Close waits for it
	// to reach zero (wait): both call into the user's meter (a lock lost,
	// an extension recorded), and a goroutine of the engine must not
	// outlive Close. An Add happens under mu with closed unset (fire) or
	// under lmu with stopping unset (workers), so every Add comes before
	// Close's Wait.
	running sync.WaitGroup
}

type schedEntry struct {
	at time.Duration // since sched.base
	l  *lock
}

// fireChunk bounds the due locks fire takes out of the heap at once: its
// buffer stays small, and the heap is not held through a whole round.
const fireChunk = 32

func (s *sched) init(limit int) {
	s.base = time.Now()
	s.limit = limit
	s.work = s.worker
}

// put sets l's next event to at (adding l to the heap, or moving it), and
// reports false once the engine is closed. l.sig held.
func (s *sched) put(l *lock, next time.Time) bool {
	at := next.Sub(s.base)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	l.watched = true
	s.set(l, at)
	return true
}

// set is put with mu held.
func (s *sched) set(l *lock, at time.Duration) {
	if l.hidx == 0 {
		s.heap = append(s.heap, schedEntry{at, l})
		l.hidx = int32(len(s.heap))
		s.up(len(s.heap) - 1)
	} else {
		i := int(l.hidx) - 1
		old := s.heap[i].at
		s.heap[i].at = at
		if at < old {
			s.up(i)
		} else {
			s.down(i)
		}
	}
	if top := s.heap[0].at; !s.firing && (!s.armed || top < s.armedAt) {
		s.arm(top)
	}
}

// arm sets the timer for at; mu held.
func (s *sched) arm(at time.Duration) {
	d := at - time.Since(s.base)
	if s.timer == nil {
		s.timer = afterFunc(d, s.fire)
	} else {
		s.timer.Reset(d)
	}
	s.armed, s.armedAt = true, at
}

// remove takes l out of the heap, if it is there. l.sig held.
func (s *sched) remove(l *lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.hidx == 0 {
		return
	}
	i := int(l.hidx) - 1
	last := len(s.heap) - 1
	if i != last {
		s.swap(i, last)
	}
	s.heap[last] = schedEntry{}
	s.heap = s.heap[:last]
	l.hidx = 0
	if i != last {
		s.up(i)
		s.down(i)
	}
	s.shrink()
	// The timer may stay armed for l: it fires, finds nothing due and
	// re-arms, which is cheaper than a Reset per Unlock.
}

// shrink gives back a heap array that a release of most locks left mostly
// empty; mu held.
func (s *sched) shrink() {
	if c := cap(s.heap); c > 1024 && len(s.heap) < c/4 {
		s.heap = append(make([]schedEntry, 0, c/2), s.heap...)
	}
}

// fire runs on the timer's goroutine: it hands every due lock to tick, in
// the order of their times, a chunk at a time, then re-arms the timer for
// the next. One fire drains at a time; a timer set meanwhile finds it
// running and leaves the rest to it.
func (s *sched) fire() {
	s.mu.Lock()
	if s.firing || s.closed {
		s.mu.Unlock()
		return
	}
	s.running.Add(1)
	defer s.running.Done()
	s.firing, s.armed = true, false
	for {
		now := time.Since(s.base)
		due := s.due[:0]
		for len(s.heap) > 0 && s.heap[0].at <= now && len(due) < fireChunk {
			due = append(due, s.pop())
		}
		if len(due) == 0 {
			break
		}
		s.mu.Unlock()
		// Out of the heap now: a lock ended meanwhile is simply not put
		// back (tick finds its cause), and one re-armed meanwhile is moved
		// again by tick, which settles its next event under its sig.
		for i, l := range due {
			l.tick()
			due[i] = nil
		}
		s.mu.Lock()
		s.due = due[:0]
	}
	s.firing = false
	if len(s.heap) > 0 && !s.closed {
		s.arm(s.heap[0].at)
	}
	s.mu.Unlock()
}

// pop takes the earliest lock out of the heap; mu held.
func (s *sched) pop() *lock {
	l := s.heap[0].l
	last := len(s.heap) - 1
	s.swap(0, last)
	s.heap[last] = schedEntry{}
	s.heap = s.heap[:last]
	l.hidx = 0
	s.down(0)
	return l
}

// extendDue puts l, due for an auto-extension, in line for a slot, and
// keeps its Until watched meanwhile and while the extension is out: Done
// closes at Until whatever the extension is doing, which also ends the
// extension (autoCtx). It reports false once the engine is closed (l,
// taken out of the heap by fire, was not among the locks Close ended).
// l.sig held, l.done made.
func (s *sched) extendDue(l *lock) bool {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.set(l, l.until.Sub(s.base))
	}
	s.mu.Unlock()
	if closed {
		return false
	}
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if l.inLine || s.stopping {
		// A duplicate wake-up: it is already in line. Or Close has
		// begun: l was in the heap when Close collected it (closed was
		// unset above, and Close sets stopping after collecting), so
		// Close has ended it.
		return true
	}
	l.inLine = true
	s.line = append(s.line, l)
	if s.out < s.limit {
		s.out++
		s.running.Add(1)
		go s.work()
	}
	return true
}

// worker runs the due auto-extensions first in line, one at a time, and
// ends when the line is empty: a goroutine per slot in use, none per lock
// waiting.
func (s *sched) worker() {
	for {
		s.lmu.Lock()
		l := s.next()
		if l == nil {
			s.out--
			s.lmu.Unlock()
			s.running.Done()
			return
		}
		l.inLine = false
		s.lmu.Unlock()
		l.extendDue()
	}
}

// next takes the first lock in line, or nil; lmu held.
func (s *sched) next() *lock {
	if s.head == len(s.line) {
		return nil
	}
	l := s.line[s.head]
	s.line[s.head] = nil
	s.head++
	if s.head == len(s.line) {
		s.line, s.head = s.line[:0], 0
		if cap(s.line) > 4096 {
			s.line = nil // a backlog's array is not kept for the quiet times
		}
	}
	return l
}

// close stops the timer, refuses any further put and returns the locks
// in the heap (every watched lock that has not ended, whether its
// extension is due, waiting or out), which Close then ends.
func (s *sched) close() []*lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	live := make([]*lock, len(s.heap))
	for i, en := range s.heap {
		live[i] = en.l
		en.l.hidx = 0
	}
	s.heap = nil
	if testSchedClosed != nil {
		testSchedClosed()
	}
	return live
}

// testSchedClosed, when set (tests only; nil in production), runs as close
// has collected the heap: a test that holds a fire inside a lock's tick
// lets it go then (closerace17_internal_test.go).
var testSchedClosed func()

// stop lets no worker start from now on; Close calls it after close.
func (s *sched) stop() {
	s.lmu.Lock()
	s.stopping = true
	s.lmu.Unlock()
}

// wait returns once every fire and worker under way has ended. Close calls
// it after stop, and after the cluster's Close has ended the extensions the
// workers wait on. A fire that its timer starts after Close finds closed
// and returns at once, uncounted.
func (s *sched) wait() { s.running.Wait() }

func (s *sched) less(i, j int) bool { return s.heap[i].at < s.heap[j].at }

func (s *sched) swap(i, j int) {
	h := s.heap
	h[i], h[j] = h[j], h[i]
	h[i].l.hidx = int32(i + 1)
	h[j].l.hidx = int32(j + 1)
}

// The heap is 4-ary, as the runtime's timer heap is: half the levels of a
// binary one, so half the moves (each a write to a lock's hidx, likely a
// cache miss at a million locks), and a node's children share a cache line
// or two of the entries.
func (s *sched) up(i int) {
	for i > 0 {
		p := (i - 1) / 4
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *sched) down(i int) {
	n := len(s.heap)
	for {
		first := 4*i + 1
		if first >= n {
			return
		}
		c := first
		for j := first + 1; j < min(first+4, n); j++ {
			if s.less(j, c) {
				c = j
			}
		}
		if !s.less(c, i) {
			return
		}
		s.swap(i, c)
		i = c
	}
}
