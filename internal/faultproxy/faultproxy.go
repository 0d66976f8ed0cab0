// Package faultproxy is a TCP proxy on 127.0.0.1 that sits between a client
// (the Redis transport) and a server (a real redis-server) and injects the
// faults a real network has, on real sockets:
//
//   - Delay: every chunk of bytes, in each direction, is delivered that much
//     later (one-way latency; a round trip pays it twice). Order is kept.
//   - Reset: every open connection is aborted with a TCP RST on both sides
//     (SO_LINGER 0), as a middlebox or a rebooted peer does.
//   - Cut: for a while nothing is forwarded in either direction and new
//     connections are not connected upstream; bytes already sent are held,
//     not lost, and flow again when the cut ends, as TCP retransmits across
//     a short partition. A request the client gave up on can thus still
//     reach the server after the cut: the dangerous case of a timed-out SET.
//   - SetTarget: new connections go to another server from now on, as after a
//     VIP or DNS flip, a promoted replica or a port reused by another process;
//     connections already open stay on the old one until Reset ends them.
//
// Each client connection gets its own upstream connection, and when either
// side closes or fails, both are closed. So the proxy never hides a server
// restart from the client: the client's connection dies with the server's,
// and the client's reconnect reaches the new process.
package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the largest read forwarded as one chunk.
const chunkSize = 32 << 10

// queueLen is how many chunks a direction holds (delayed or cut) before it
// stops reading, which pushes back on the sender through TCP.
const queueLen = 64

// dialTimeout bounds the upstream dial of one connection.
const dialTimeout = 2 * time.Second

// Stats counts what the proxy did.
type Stats struct {
	Accepted int64 // client connections accepted
	Resets   int64 // connections aborted by Reset
	Cuts     int64 // calls of Cut
	Held     int64 // chunks held by a cut right now (read, not yet delivered)
}

// Proxy forwards connections from Addr to the target.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	target  string
	closed  bool
	delay   time.Duration
	cutEnd  time.Time     // zero: not cut
	healed  chan struct{} // closed when the current cut ends; nil while not cut
	cutTime *time.Timer
	links   map[*link]struct{}

	wg       sync.WaitGroup
	accepted atomic.Int64
	resets   atomic.Int64
	cuts     atomic.Int64
	held     atomic.Int64 // chunks waiting in waitFlow for a cut to heal
}

// New starts a proxy on a free port of 127.0.0.1 that forwards to target
// (host:port). Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards new connections to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetTarget sends every connection accepted from now on to addr (host:port).
// Connections already open keep their upstream; Reset ends them, after which
// a client that reconnects reaches addr.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Accepted: p.accepted.Load(), Resets: p.resets.Load(), Cuts: p.cuts.Load(), Held: p.held.Load()}
}

// SetDelay sets the one-way delay added to every chunk from now on (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = max(d, 0)
	p.mu.Unlock()
}

// Delay is the current one-way delay.
func (p *Proxy) Delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Reset aborts every open connection with a RST to both the client and the
// server, and returns how many it aborted. New connections are accepted as
// before.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.abort()
	}
	p.resets.Add(int64(len(links)))
	return len(links)
}

// Cut stops forwarding for d (extending a cut in progress if it would end
// sooner). Bytes are held, not dropped; Heal or the end of d lets them flow.
func (p *Proxy) Cut(d time.Duration) {
	p.cuts.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || d <= 0 {
		return
	}
	end := time.Now().Add(d)
	if p.healed == nil {
		p.healed = make(chan struct{})
	}
	if end.After(p.cutEnd) {
		p.cutEnd = end
		if p.cutTime != nil {
			p.cutTime.Stop()
		}
		p.cutTime = time.AfterFunc(d, p.healIfDue)
	}
}

// Heal ends a cut now.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healLocked()
}

// Cutting reports whether a cut is in progress.
func (p *Proxy) Cutting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healed != nil
}

func (p *Proxy) healIfDue() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil && !time.Now().Before(p.cutEnd) {
		p.healLocked()
	}
}

func (p *Proxy) healLocked() {
	if p.cutTime != nil {
		p.cutTime.Stop()
		p.cutTime = nil
	}
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
	p.cutEnd = time.Time{}
}

// waitFlow returns once nothing is cut, or false when done closes first.
func (p *Proxy) waitFlow(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		h := p.healed
		p.mu.Unlock()
		if h == nil {
			return true
		}
		p.held.Add(1)
		select {
		case <-h:
			p.held.Add(-1)
		case <-done:
			p.held.Add(-1)
			return false
		}
	}
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.healLocked()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // EMFILE and the like: try again
			continue
		}
		p.accepted.Add(1)
		l := &link{p: p, down: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.run()
	}
}

// link is one client connection and its upstream connection.
type link struct {
	p    *Proxy
	down net.Conn // the client's
	mu   sync.Mutex
	up   net.Conn // the server's; nil until dialled
	once sync.Once
	done chan struct{} // closed when the link is torn down
}

func (l *link) run() {
	defer l.p.wg.Done()
	defer func() {
		l.close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	}()
	// A cut also holds new connections: the client's connect succeeded (the
	// kernel accepted it), but nothing reaches the server yet.
	if !l.p.waitFlow(l.done) {
		return
	}
	up, err := net.DialTimeout("tcp", l.p.Target(), dialTimeout)
	if err != nil {
		return
	}
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		up.Close()
		return
	default:
	}
	l.up = up
	l.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { l.pipe(l.down, up) })
	wg.Go(func() { l.pipe(up, l.down) })
	wg.Wait()
}

type chunk struct {
	b  []byte
	at time.Time // when to deliver it
}

// pipe forwards src to dst until either fails or the link is torn down; it
// then tears the link down. While there is no delay, no cut and nothing
// queued, it writes each read straight through; otherwise chunks go through
// a queue to a writer that waits out the delay or the cut, in order.
func (l *link) pipe(src, dst net.Conn) {
	q := make(chan chunk, queueLen)
	var (
		mu      sync.Mutex // serialises writes to dst; guards pending
		pending int        // chunks queued and not yet written
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		defer l.close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-l.done:
					return
				}
			}
			if !l.p.waitFlow(l.done) {
				return
			}
			mu.Lock()
			_, err := dst.Write(c.b)
			pending--
			mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	// Deferred in this order so that they run as: stop queueing, take the
	// link down (which ends a writer waiting on a delay or cut), wait for
	// the writer. The link goes down whichever side ended: redis clients
	// never half-close.
	defer wg.Wait()
	defer l.close()
	defer close(q)
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			delay, cut := l.p.state()
			mu.Lock()
			if pending == 0 && delay == 0 && !cut {
				_, werr := dst.Write(buf[:n])
				mu.Unlock()
				if werr != nil {
					return
				}
			} else {
				pending++
				mu.Unlock()
				select {
				case q <- chunk{b: slices.Clone(buf[:n]), at: time.Now().Add(delay)}:
				case <-l.done:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// state is the current delay and whether a cut is in progress.
func (p *Proxy) state() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay, p.healed != nil
}

// close tears the link down with a normal close (FIN).
func (l *link) close() { l.teardown(false) }

// abort tears the link down with a RST on both sides.
func (l *link) abort() { l.teardown(true) }

func (l *link) teardown(rst bool) {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		up := l.up
		l.mu.Unlock()
		for _, c := range []net.Conn{l.down, up} {
			if c == nil {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok && rst {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}
