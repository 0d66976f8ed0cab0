package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4"

	"github.com/quorumlock/redlock/internal/faultproxy"
	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/redisproc"
)

// ClientPause is the GC-pause scenario: engines in worker processes of
// their own write to a protected resource under their locks, and one of
// them is stopped (SIGSTOP) right after a client checked its lock and
// before it writes, past the lock's validity. With fencing the resource
// must refuse the late write (history rule stale-write, and late-write);
// without fencing (Config.NoFencing, the negative control) it accepts it on
// top of the next holder's write, and late-write must report it.
const ClientPause = "client-pause"

// Client-pause shape: how many worker processes, and clients in each.
const (
	pauseWorkers        = 2
	maxClientsPerWorker = 8
)

// PauseReport is what the client-pause fault did, in Report.
type PauseReport struct {
	Fencing          bool `json:"fencing"`
	Workers          int  `json:"workers"`
	ClientsPerWorker int  `json:"clients_per_worker"`
	// Pauses: a worker stopped while a client held a lock it had checked
	// and had not yet written under. PastValidity: of those, the process
	// was resumed after the lock's validity had ended. NewerFirst: of
	// those, a later holder's write was accepted before the paused client
	// wrote (what makes its write stale).
	Pauses       int64 `json:"pauses"`
	PastValidity int64 `json:"past_validity"`
	NewerFirst   int64 `json:"newer_write_first"`
	// StaleRefused and StaleAccepted: what the resource did with the
	// paused clients' writes made past validity after a newer write.
	StaleRefused  int64 `json:"stale_refused"`
	StaleAccepted int64 `json:"stale_accepted"`
	// Writes the resource answered; WriteErrors got no answer. Unreported
	// is the resource's own count of accepted writes minus those the
	// workers reported: it should be 0 (every write is in the history).
	WritesAccepted int64 `json:"writes_accepted"`
	WritesRefused  int64 `json:"writes_refused"`
	WriteErrors    int64 `json:"write_errors"`
	Unreported     int64 `json:"unreported_writes"`
}

// pauser is the client-pause state of a run.
type pauser struct {
	resource []*redisproc.Server
	workers  []*workerProc
	started  chan struct{} // closed once base is set and the workers may report
	clk      monoCal       // CLOCK_MONOTONIC at the history's base
	busy     atomic.Bool   // one pause at a time

	mu      sync.Mutex
	watches map[*watch]struct{}
	stats   PauseReport
}

// workerProc is one worker process.
type workerProc struct {
	id      int
	cmd     *exec.Cmd
	stdinMu sync.Mutex
	stdin   io.WriteCloser
	stderr  *tailBuffer
	ready   chan struct{}
	about   chan workerLine
	exited  chan struct{} // closed once its output ended and it was waited for
	errMsg  atomic.Value  // string, from an "error" line

	windows []window // stops, under pauser.mu
}

// window is one stop of a worker, on the history's timebase: From before
// SIGSTOP was sent, To before SIGCONT was sent, so the process ran in
// neither gap and no section that started after To is taken as paused.
type window struct{ from, to time.Duration }

type watch struct {
	match func(*history.Grant, *history.Write) bool
	ch    chan *history.Write
}

func (w *workerProc) send(word string) {
	w.stdinMu.Lock()
	defer w.stdinMu.Unlock()
	_, _ = io.WriteString(w.stdin, word+"\n") // a worker that exited is reported by its reader
}

// setupPause starts the protected resource and the worker processes.
func (r *run) setupPause(ctx context.Context) error {
	if !r.cfg.has(ClientPause) {
		return nil
	}
	p := &pauser{started: make(chan struct{}), watches: map[*watch]struct{}{}}
	r.pz = p
	p.stats.Fencing = !r.cfg.NoFencing
	p.stats.Workers = pauseWorkers
	p.stats.ClientsPerWorker = min(r.cfg.Clients, maxClientsPerWorker)
	res, err := redisproc.Start(ctx, 1)
	if err != nil {
		return fmt.Errorf("%w: starting the protected resource's redis-server: %w", ErrSetup, err)
	}
	p.resource = res
	q := r.cfg.period()
	if !r.cfg.Quarantine {
		q = 0
	}
	for i := range pauseWorkers {
		masters := r.workerMasters()
		if r.cfg.has(AddressFlip) && r.cl == nil {
			// Through proxies that address-flip moves with the in-process
			// engines' (see run.flipProxies).
			row := make([]*faultproxy.Proxy, Masters)
			r.flipProxies = append(r.flipProxies, row)
			for m, s := range r.servers {
				fp, err := faultproxy.New(s.Addr)
				if err != nil {
					return fmt.Errorf("%w: %w", ErrSetup, err)
				}
				row[m] = fp
				masters[m] = fp.Addr()
			}
		}
		wc := workerConfig{id: i + 1, masters: masters, resource: res[0].Addr, keys: r.keys,
			clients: p.stats.ClientsPerWorker, ttl: r.cfg.TTL, masterTimeout: r.cfg.MasterTimeout,
			quarantine: q, fencing: !r.cfg.NoFencing, seed: r.cfg.Seed, work: r.cfg.Work}
		wp, err := r.spawnWorker(wc)
		if err != nil {
			return fmt.Errorf("%w: starting worker %d: %w", ErrSetup, i+1, err)
		}
		p.workers = append(p.workers, wp)
	}
	return nil
}

func (r *run) spawnWorker(wc workerConfig) (*workerProc, error) {
	argv := append(append([]string{}, r.cfg.WorkerCommand[1:]...), wc.args()...)
	cmd := exec.Command(r.cfg.WorkerCommand[0], argv...)
	cmd.SysProcAttr = workerProcAttr()
	wp := &workerProc{id: wc.id, cmd: cmd, stderr: &tailBuffer{max: 4096, tee: r.cfg.EngineLog},
		ready: make(chan struct{}), about: make(chan workerLine, 1), exited: make(chan struct{})}
	cmd.Stderr = wp.stderr
	var err error
	if wp.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go r.readWorker(wp, out)
	return wp, nil
}

// readWorker turns a worker's lines into history until its output ends,
// then waits for the process.
func (r *run) readWorker(wp *workerProc, out io.Reader) {
	defer close(wp.exited)
	defer func() { _ = wp.cmd.Wait() }()
	p := r.pz
	var log *history.Log
	var readyOnce sync.Once
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l workerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			wp.errMsg.Store("bad line from the worker: " + sc.Text())
			continue
		}
		switch l.Ev {
		case "ready":
			readyOnce.Do(func() { close(wp.ready) })
		case "about":
			select {
			case wp.about <- l:
			default:
			}
		case "error":
			wp.errMsg.Store(l.Msg)
		case "done":
			r.mu.Lock()
			for k, n := range l.LockErrors {
				r.lockErrs[k] += n
			}
			for k, n := range l.UnlockErrors {
				r.unlockErrs[k] += n
			}
			r.mu.Unlock()
			p.mu.Lock()
			p.stats.WriteErrors += l.WriteErrors
			p.mu.Unlock()
		case "grant":
			<-p.started
			if log == nil {
				log = r.rec.Log()
			}
			g, w := p.convert(wp, l)
			log.Add(g)
			if g.Ran {
				r.sections.Add(1)
			}
			r.count(r.held, "worker", 1)
			if w != nil {
				log.AddWrite(*w)
			}
			p.notify(&g, w)
		}
	}
	if err := sc.Err(); err != nil {
		wp.errMsg.Store("reading the worker's output: " + err.Error())
	}
}

// convert puts a worker's grant line on the history's timebase.
func (p *pauser) convert(wp *workerProc, l workerLine) (history.Grant, *history.Write) {
	g := history.Grant{Key: l.Key, Holder: l.Holder, Token: l.Token, GrantedAt: p.at(l.GrantedAt), ValidUntil: p.at(l.ValidUntil)}
	if l.Released {
		g.Released, g.ReleasedAt = true, p.at(l.ReleasedAt)
	}
	if l.Ran {
		g.Ran, g.Start, g.End, g.Signaled = true, p.at(l.Start), p.at(l.End), l.Signaled
		if l.Due != 0 {
			g.Due = p.at(l.Due)
		}
		if l.StallDue != 0 {
			g.StallDue, g.StallRan = p.at(l.StallDue), p.at(l.StallRan)
		}
		p.mu.Lock()
		for _, win := range wp.windows {
			if g.Start < win.to && g.End > win.from {
				g.Paused = true
			}
		}
		p.mu.Unlock()
	}
	if l.Write == nil {
		return g, nil
	}
	return g, &history.Write{Key: l.Key, Holder: l.Holder, Token: l.Token, GrantedAt: g.GrantedAt, ValidUntil: g.ValidUntil,
		SentAt: p.at(l.Write.Sent), AckedAt: p.at(l.Write.Acked), Accepted: l.Write.Accepted, Seq: l.Write.Seq, Seen: l.Write.Seen}
}

// at converts CLOCK_MONOTONIC to the history's timebase.
func (p *pauser) at(mono int64) time.Duration { return time.Duration(mono - p.clk.base) }

func (p *pauser) watch(match func(*history.Grant, *history.Write) bool) *watch {
	w := &watch{match: match, ch: make(chan *history.Write, 1)}
	p.mu.Lock()
	p.watches[w] = struct{}{}
	p.mu.Unlock()
	return w
}

func (p *pauser) unwatch(w *watch) {
	p.mu.Lock()
	delete(p.watches, w)
	p.mu.Unlock()
}

func (p *pauser) notify(g *history.Grant, w *history.Write) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for wt := range p.watches {
		if wt.match(g, w) {
			wt.ch <- w
			delete(p.watches, wt)
		}
	}
}

// waitWorkers waits until every worker's engine can take a lock.
func (r *run) waitWorkers(ctx context.Context) error {
	if r.pz == nil {
		return nil
	}
	limit := time.NewTimer(r.cfg.period() + 20*time.Second)
	defer limit.Stop()
	for _, wp := range r.pz.workers {
		select {
		case <-wp.ready:
		case <-wp.exited:
			return fmt.Errorf("%w: worker %d exited before it was ready: %s%s", ErrSetup, wp.id, wp.reason(), wp.stderr.String())
		case <-limit.C:
			return fmt.Errorf("%w: worker %d not ready in time: %s", ErrSetup, wp.id, wp.stderr.String())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (wp *workerProc) reason() string {
	if s, ok := wp.errMsg.Load().(string); ok {
		return s + "\n"
	}
	return ""
}

// startWorkers pairs the clocks and lets the workers' clients go.
func (r *run) startWorkers() error {
	p := r.pz
	if p == nil {
		return nil
	}
	clk, err := calibrate()
	if err != nil {
		return err
	}
	// The base's CLOCK_MONOTONIC reading.
	p.clk = monoCal{base: clk.base - int64(clk.at.Sub(r.rec.Base())), at: r.rec.Base()}
	close(p.started)
	for _, wp := range p.workers {
		wp.send("start")
	}
	return nil
}

// stopWorkers tells the workers to stop, waits for their last lines, and
// reconciles the resource's count of accepted writes with the history.
func (r *run) stopWorkers() {
	p := r.pz
	if p == nil {
		return
	}
	for _, wp := range p.workers {
		_ = contProcess(wp.cmd.Process.Pid) // in case a pause was cut short
		wp.send("stop")
	}
	limit := time.NewTimer(10*time.Second + 2*r.cfg.TTL)
	defer limit.Stop()
	for _, wp := range p.workers {
		select {
		case <-wp.exited:
		case <-limit.C:
			_ = wp.cmd.Process.Kill()
			<-wp.exited
		}
	}
}

// finishPause fills the report's client-pause part from the history.
func (r *run) finishPause(h history.History) *PauseReport {
	p := r.pz
	if p == nil {
		return nil
	}
	p.mu.Lock()
	rep := p.stats
	p.mu.Unlock()
	accepted := map[string]int64{}
	for _, w := range h.Writes {
		if w.Accepted {
			rep.WritesAccepted++
			accepted[w.Key]++
		} else {
			rep.WritesRefused++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", p.resource[0].Addr)
	if err != nil {
		rep.Unreported = -1
		return &rep
	}
	defer c.Close()
	for _, k := range r.keys {
		var seq string
		mb := radix.Maybe{Rcv: &seq}
		if err := c.Do(ctx, radix.Cmd(&mb, "HGET", resourceKey(k), "seq")); err != nil {
			rep.Unreported = -1
			return &rep
		}
		if !mb.Null {
			n, _ := strconv.ParseInt(seq, 10, 64)
			rep.Unreported += n - accepted[k]
		}
	}
	return &rep
}

// teardownPause kills the workers by pid and stops the resource.
func (r *run) teardownPause() {
	p := r.pz
	if p == nil {
		return
	}
	for _, wp := range p.workers {
		select {
		case <-wp.exited:
			continue
		default:
		}
		_ = wp.cmd.Process.Kill() // SIGKILL ends a stopped process too
		<-wp.exited
	}
	redisproc.StopAll(p.resource)
}

// clientPause starts one pause of a worker unless one is under way.
func (r *run) clientPause(ctx context.Context, rng *rand.Rand) {
	p := r.pz
	if !p.busy.CompareAndSwap(false, true) {
		r.count(r.detail, "client-pause.busy", 1)
		return
	}
	wp := p.workers[rng.IntN(len(p.workers))]
	d := r.cfg.TTL + uniform(rng, r.cfg.TTL/4, r.cfg.TTL/2)
	r.faultWG.Go(func() {
		defer p.busy.Store(false)
		r.pauseWorker(ctx, wp, d)
	})
}

// pauseWorker arms wp, stops it once a client announced it holds a lock
// and is about to write, keeps it stopped for d (more than a TTL, so past
// the lock's validity), resumes it, waits (bounded) until a later holder's
// write of the key was accepted, and then lets the paused client write.
func (r *run) pauseWorker(ctx context.Context, wp *workerProc, d time.Duration) {
	p := r.pz
	select { // an announcement left from a pause cut short does not count
	case <-wp.about:
	default:
	}
	wp.send("arm")
	var ab workerLine
	select {
	case ab = <-wp.about:
	case <-ctx.Done():
		return
	}
	p.mu.Lock()
	from := r.rec.Now()
	wp.windows = append(wp.windows, window{from: from, to: 1<<63 - 1})
	idx := len(wp.windows) - 1
	p.mu.Unlock()
	if err := stopProcess(wp.cmd.Process.Pid); err != nil {
		wp.send("go")
		r.count(r.detail, "client-pause.failed", 1)
		return
	}
	sleep(ctx, d) // cut short only when the run ends
	p.mu.Lock()
	to := r.rec.Now()
	wp.windows[idx].to = to
	p.mu.Unlock()
	_ = contProcess(wp.cmd.Process.Pid)

	validUntil := p.at(ab.ValidUntil)
	past := to > validUntil
	fenced := ab.Token > 0
	newer := p.watch(func(g *history.Grant, w *history.Write) bool {
		if w == nil || !w.Accepted || w.Key != ab.Key || w.Holder == ab.Holder {
			return false
		}
		if fenced {
			return w.Token > ab.Token
		}
		return w.GrantedAt >= validUntil
	})
	t := time.NewTimer(3 * r.cfg.TTL)
	defer t.Stop()
	newerFirst := false
	select {
	case <-newer.ch:
		newerFirst = true
	case <-t.C:
	case <-ctx.Done():
	}
	p.unwatch(newer)
	own := p.watch(func(g *history.Grant, w *history.Write) bool {
		return g.Holder == ab.Holder && g.Key == ab.Key && g.Token == ab.Token
	})
	wp.send("go")
	var w *history.Write
	gotOwn := false
	t.Reset(3 * r.cfg.TTL)
	select {
	case w = <-own.ch:
		gotOwn = true
	case <-t.C:
	case <-ctx.Done():
		// The worker is told to stop after the run; its line may still come.
		select {
		case w = <-own.ch:
			gotOwn = true
		case <-time.After(2 * r.cfg.TTL):
		}
	}
	p.unwatch(own)

	outcome := "no answer"
	switch {
	case !gotOwn:
		outcome = "not reported"
	case w == nil:
		outcome = "not written (run ended, or the write failed)"
	case w.Accepted:
		outcome = fmt.Sprintf("ACCEPTED as write %d", w.Seq)
	default:
		outcome = fmt.Sprintf("refused (resource had token %d)", w.Seen)
	}
	p.mu.Lock()
	p.stats.Pauses++
	if past {
		p.stats.PastValidity++
		if newerFirst {
			p.stats.NewerFirst++
			if w != nil && w.Accepted {
				p.stats.StaleAccepted++
			} else if w != nil {
				p.stats.StaleRefused++
			}
		}
	}
	p.mu.Unlock()
	r.count(r.faults, ClientPause, 1)
	r.event(ClientPause, fmt.Sprintf("worker %d stopped for %v while %s held %s (token %d, valid until %v); resumed %v past validity; a newer write first: %v; its write: %s",
		wp.id, (to-from).Round(time.Millisecond), ab.Holder, ab.Key, ab.Token, validUntil.Round(time.Microsecond),
		(to-validUntil).Round(time.Millisecond), newerFirst, outcome), from, to)
}

// tailBuffer keeps the end of a worker's stderr for error messages, and
// copies it to tee when set.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	tee io.Writer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tee != nil {
		_, _ = b.tee.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// validatePause checks the pause and client-pause settings.
func (c *Config) validatePause() error {
	if c.has(Pause) && !redisproc.CanPause {
		return errors.New("--faults pause: needs a Unix (SIGSTOP and SIGCONT)")
	}
	if !c.has(ClientPause) {
		return nil
	}
	if !clientPauseSupported {
		return errors.New("--faults client-pause: needs Linux (CLOCK_MONOTONIC shared by processes, Pdeathsig)")
	}
	if len(c.WorkerCommand) == 0 {
		return errors.New("--faults client-pause: no worker command to start the engines' processes with (Config.WorkerCommand)")
	}
	return nil
}
