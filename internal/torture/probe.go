package torture

import (
	"sync"
	"time"
)

// The starvation probe: evidence, per process, of how late its timers ran.
// A section planned past its validity waits on the lost-lock signal, so its
// own timer is due after the validity and cannot show that the process was
// stalled across it (history.Grant.Due); the probe can. It is a timer of
// its own, rearmed every probePeriod on a goroutine that does nothing else:
// a wake-up due by the validity's end that ran only once the section's own
// timer was due shows the process ran no timer over that span, so the
// engine's timer, due at the validity's end, could not have run either
// (history.Grant.StallDue, StallRan; the checker's rule is history's
// probed). The probe costs one short wake-up every probePeriod.

// probePeriod: the probe shows a stall that began at least this long
// before the validity ended (its wake-up is then pending across the end).
const probePeriod = 2 * time.Millisecond

// probeRing bounds the wake-ups kept: a section's end asks about the last
// few only (those that ran after its own timer was due).
const probeRing = 256

type probeWake struct{ due, ran time.Duration }

type probe struct {
	now    func() time.Duration
	period time.Duration
	// late, for tests only: how long the wake-up due at due stays unrun
	// after its timer fired, as on a process denied the CPU.
	late func(due time.Duration) time.Duration

	mu      sync.Mutex
	pending time.Duration // the armed wake-up's due; 0 while none is armed
	ring    [probeRing]probeWake
	n       int // wake-ups recorded

	quit     chan struct{}
	finished chan struct{}
	stopOnce sync.Once
}

// startProbe starts a probe reading the clock now (the history's timebase).
func startProbe(now func() time.Duration, period time.Duration, late func(time.Duration) time.Duration) *probe {
	p := &probe{now: now, period: period, late: late, quit: make(chan struct{}), finished: make(chan struct{})}
	go p.loop()
	return p
}

func (p *probe) loop() {
	defer close(p.finished)
	t := time.NewTimer(p.period)
	defer t.Stop()
	for {
		// Read after the timer was set: never before its deadline, so
		// lateness is never overstated.
		due := p.now() + p.period
		p.mu.Lock()
		p.pending = due
		p.mu.Unlock()
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		if p.late != nil {
			if d := p.late(due); d > 0 {
				time.Sleep(d)
			}
		}
		p.mu.Lock()
		p.ring[p.n%probeRing] = probeWake{due: due, ran: p.now()}
		p.n++
		p.pending = 0
		p.mu.Unlock()
		t.Reset(p.period)
	}
}

// stop ends the probe and waits for its goroutine. Safe on nil and twice.
func (p *probe) stop() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() { close(p.quit) })
	<-p.finished
}

// stall returns the probe's wake-up that was due by until and ran no
// earlier than woke, if there is one: due and when it ran. A wake-up due by
// until that has not run yet when stall is called counts, with ran the
// moment of the call (it runs later still); call stall after woke. Nil
// probe: none.
func (p *probe) stall(until, woke time.Duration) (due, ran time.Duration, ok bool) {
	if p == nil {
		return 0, 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := p.n - 1; i >= max(0, p.n-probeRing); i-- {
		w := p.ring[i%probeRing]
		if w.ran < woke {
			break // recorded in the order they ran
		}
		if w.due <= until {
			return w.due, w.ran, true
		}
	}
	if p.pending > 0 && p.pending <= until {
		if now := p.now(); now >= woke {
			return p.pending, now, true
		}
	}
	return 0, 0, false
}

// stallEvidence is the probe's evidence for a section that ended at end,
// past its validity until, unsignalled; its own timer was due at due (0:
// none). ok false: none.
func (p *probe) stallEvidence(until, end, due time.Duration) (time.Duration, time.Duration, bool) {
	if end <= until {
		return 0, 0, false
	}
	woke := end
	if due > 0 {
		woke = min(woke, due)
	}
	return p.stall(until, woke)
}
