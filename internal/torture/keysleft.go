package torture

// The end-of-run key check (SAFETY.md, "No key left on a master (keysleft17)").
//
// The house rule: no key is left on a master after a failed attempt or an
// Unlock. Keys do legitimately outlive their attempt when the master was
// down, paused or cut off when the release was due: the engine leaves those
// to the TTL (actors/unlockleft.go), and nothing seen from outside tells such
// a key from a leaked one once the run has had faults. So the check judges
// a quiet tail instead: after the faulted phase every fault is healed, the
// run settles (every engine's link to every master answers, every restarted
// master is past its quarantine, every key the faulted phase wrote has
// expired), then the same engines and clients run fault-free for a while,
// stop, let every Unlock return, and Close. After that no lock key may be on
// any master: every attempt of the tail that failed, every Unlock, every
// call the clients cancelled and every background release ends with its
// keys deleted, on masters that were up throughout. Fencing counters
// (transport.FencePrefix) live on by design and are not lock keys.
//
// What it cannot see: a key whose release was due during a fault (the
// faulted phase is not judged), and a leak in the tail that expired before
// the scan (keys live a TTL; the scan runs right after Close, so the tail's
// last TTL is what it sees, which is when the clients stop, cancel their
// Lock calls and Unlock, and the engines Close).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4"

	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/redis"
)

// KeyLeft is the violation of a lock key found on a master after the quiet
// tail's Unlocks and Close.
const KeyLeft history.Kind = "key-left"

// KeysReport is what the end-of-run key check did.
type KeysReport struct {
	// SettleS is how long the run waited after the last fault healed
	// before the tail began; TailS how long the tail's clients ran.
	SettleS float64 `json:"settle_s"`
	TailS   float64 `json:"tail_s"`
	// TailGrants are the grants of the tail (in Report.Grants too).
	TailGrants int64 `json:"tail_grants"`
	// ScanAfterS is the time from the tail's end to the first scan: the
	// clients' last Unlocks and the engines' Close. A leak older than a
	// TTL before the scan has expired by then; the check sees the rest.
	ScanAfterS float64 `json:"scan_after_s"`
	// Servers is how many redis-servers were scanned (a cluster's shards
	// each count); Fences the fencing counters found, which are kept on
	// purpose.
	Servers int `json:"servers"`
	Fences  int `json:"fence_counters"`
	// Left is the lock keys still on a master after Close, confirmed by a
	// second scan (each is a KeyLeft violation).
	Left int `json:"left"`
	// Skipped says why the check did not run ("" when it did).
	Skipped string `json:"skipped,omitempty"`
}

// leftKey is one lock key found on a server.
type leftKey struct {
	master, shard int
	addr          string
	key, typ, val string
	pttl          time.Duration // -1: no expiry
}

// scanTarget is one redis-server the check reads.
type scanTarget struct {
	master, shard int
	addr          string
}

func (r *run) scanTargets() []scanTarget {
	var out []scanTarget
	if r.cl != nil {
		for m, nodes := range r.cl.nodes {
			for s, n := range nodes {
				out = append(out, scanTarget{master: m, shard: s, addr: n.Addr})
			}
		}
		return out
	}
	for m, s := range r.servers {
		out = append(out, scanTarget{master: m, shard: -1, addr: s.Addr})
	}
	return out
}

// tailLength is how long the quiet tail's clients run.
func (c *Config) tailLength() time.Duration {
	if c.Tail > 0 {
		return c.Tail
	}
	return c.TTL + 2*time.Second
}

// quietTail runs the settle and the tail and checks the masters' keys
// after every engine closed; it returns the report and the violations.
// The faulted phase must be over: faults stopped and healed, clients and
// Unlocks returned, workers stopped.
func (r *run) quietTail(ctx context.Context) (*KeysReport, []history.Violation) {
	rep := &KeysReport{Servers: len(r.scanTargets())}
	healed := time.Now()
	if err := r.settle(ctx, healed); err != nil {
		rep.Skipped = err.Error()
		return rep, nil
	}
	rep.SettleS = round(time.Since(healed).Seconds(), 3)

	before := r.rec.Grants()
	r.quiet.Store(true)
	tailCtx, cancel := context.WithTimeout(ctx, r.cfg.tailLength())
	start := time.Now()
	var clients sync.WaitGroup
	for e, eng := range r.engines {
		for c := range r.cfg.Clients {
			clients.Go(func() { r.runClient(tailCtx, eng, e, c) })
		}
	}
	<-tailCtx.Done()
	ended := time.Now()
	cancel()
	clients.Wait()
	rep.TailS = round(time.Since(start).Seconds(), 3)
	r.unlocks.Wait()
	rep.TailGrants = int64(r.rec.Grants() - before)
	if ctx.Err() != nil {
		rep.Skipped = "interrupted"
		return rep, nil
	}
	for _, e := range r.engines {
		_ = e.Close() // its last releases reach the masters before it returns
	}
	if r.cfg.plant != nil {
		r.cfg.plant(r.scanTargets())
	}
	rep.ScanAfterS = round(time.Since(ended).Seconds(), 3)
	left, fences, err := r.keysLeft(ctx)
	rep.Fences = fences
	if err != nil {
		rep.Skipped = err.Error()
		return rep, nil
	}
	rep.Left = len(left)
	vs := make([]history.Violation, 0, len(left))
	for _, k := range left {
		vs = append(vs, history.Violation{Kind: KeyLeft, Key: k.key, Detail: k.String()})
	}
	return rep, vs
}

func (k leftKey) String() string {
	where := fmt.Sprintf("master %d (%s)", k.master+1, k.addr)
	if k.shard >= 0 {
		where = fmt.Sprintf("master %d shard %d (%s)", k.master+1, k.shard+1, k.addr)
	}
	ttl := "no expiry"
	if k.pttl >= 0 {
		ttl = "PTTL " + k.pttl.String()
	}
	return fmt.Sprintf("%s key left on %s after the quiet tail's Unlocks and Close: %s, value %s", k.typ, where, ttl, k.val)
}

// settle waits until the faulted phase can leave nothing the tail could be
// blamed for: every engine's link to every master answers, every restarted
// master is past its quarantine (counted from the heal, after which nothing
// restarts), and every key the faulted phase wrote has expired (its last
// write landed by the heal, give or take a second for bytes a fault held;
// keys live at most the TTL).
func (r *run) settle(ctx context.Context, healed time.Time) error {
	until := healed.Add(max(r.cfg.period(), r.cfg.TTL) + r.cfg.TTL + time.Second)
	limit := time.Now().Add(10*time.Second + r.cfg.period())
	for e, row := range r.links {
		for m, l := range row {
			for {
				octx, cancel := context.WithTimeout(ctx, r.cfg.MasterTimeout)
				res := make([]transport.Result, 1)
				err := l.Do(octx, []transport.Op{{Kind: transport.Release, Key: "torture-settle:" + strconv.Itoa(e) + ":" + strconv.Itoa(m), Value: "-"}}, res)
				cancel()
				if err == nil && res[0].Err == nil {
					break
				}
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted")
				}
				if time.Now().After(limit) {
					return fmt.Errorf("engine %d's link to master %d did not answer after the faults healed: %v %v", e+1, m+1, err, res[0].Err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(r.cfg.MasterTimeout):
				}
			}
		}
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted")
	case <-time.After(time.Until(until)):
	}
	return nil
}

// keysLeft scans every server for lock keys, twice: a key found by the
// first scan is reported only if the second, two master timeouts later,
// finds it again with the same value (a release Close let go of on a
// socket may still be on its way into the server). It returns the keys
// and how many fencing counters it passed over.
func (r *run) keysLeft(ctx context.Context) ([]leftKey, int, error) {
	var first []leftKey
	fences := 0
	for _, t := range r.scanTargets() {
		ks, f, err := scanServer(ctx, t)
		if err != nil {
			return nil, fences, err
		}
		first = append(first, ks...)
		fences += f
	}
	if len(first) == 0 {
		return nil, fences, nil
	}
	select {
	case <-ctx.Done():
		return nil, fences, ctx.Err()
	case <-time.After(2 * r.cfg.MasterTimeout):
	}
	var out []leftKey
	for _, t := range r.scanTargets() {
		again, _, err := scanServer(ctx, t)
		if err != nil {
			return nil, fences, err
		}
		for _, k := range first {
			if k.addr != t.addr {
				continue
			}
			if i := slices.IndexFunc(again, func(a leftKey) bool { return a.key == k.key && a.val == k.val }); i >= 0 {
				out = append(out, again[i])
			}
		}
	}
	slices.SortFunc(out, func(a, b leftKey) int {
		return cmp.Or(cmp.Compare(a.master, b.master), cmp.Compare(a.shard, b.shard), cmp.Compare(a.key, b.key))
	})
	return out, fences, nil
}

// isFence reports whether key is a fencing counter (kept on purpose).
func isFence(key string) bool {
	return strings.HasPrefix(key, transport.FencePrefix) || strings.HasPrefix(key, redis.ClusterFencePrefix)
}

// scanServer lists the lock keys on one server with their type, PTTL and
// value.
func scanServer(ctx context.Context, t scanTarget) ([]leftKey, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", t.addr)
	if err != nil {
		return nil, 0, fmt.Errorf("key check: master %d (%s): %w", t.master+1, t.addr, err)
	}
	defer c.Close()
	var keys []string
	sc := (radix.ScannerConfig{Command: "SCAN", Count: 1000}).New(c)
	var k string
	for sc.Next(ctx, &k) {
		keys = append(keys, k)
	}
	if err := sc.Close(); err != nil {
		return nil, 0, fmt.Errorf("key check: SCAN of master %d (%s): %w", t.master+1, t.addr, err)
	}
	slices.Sort(keys)
	// A node that imports a key's slot (a reshard cut half way by a fault
	// leaves the slot so: MIGRATING on its owner, IMPORTING here, with the
	// keys moved so far) answers MOVED to a plain read of a key it holds.
	// Clients still reach such a key (ASK), so the check reads it as they
	// do.
	read := func(rcv any, cmd string, args ...string) error {
		return redisproc.DoAsking(ctx, c, rcv, cmd, args...)
	}
	var out []leftKey
	fences := 0
	for _, k := range keys {
		if isFence(k) {
			fences++
			continue
		}
		lk := leftKey{master: t.master, shard: t.shard, addr: t.addr, key: k}
		var ms int64
		if err := read(&ms, "PTTL", k); err != nil {
			return nil, fences, fmt.Errorf("key check: PTTL %s on master %d: %w", k, t.master+1, err)
		}
		if ms == -2 {
			continue // expired between SCAN and PTTL
		}
		lk.pttl = time.Duration(ms) * time.Millisecond
		if ms < 0 {
			lk.pttl = -1
		}
		if err := read(&lk.typ, "TYPE", k); err != nil {
			return nil, fences, err
		}
		switch lk.typ {
		case "string":
			var v radix.Maybe
			var s string
			v.Rcv = &s
			if err := read(&v, "GET", k); err != nil {
				return nil, fences, err
			}
			lk.val = strconv.Quote(s)
		case "zset":
			var m []string
			if err := read(&m, "ZRANGE", k, "0", "-1", "WITHSCORES"); err != nil {
				return nil, fences, err
			}
			lk.val = "[" + strings.Join(m, " ") + "]"
		case "none":
			continue // deleted between SCAN and TYPE
		default:
			lk.val = "(" + lk.typ + ")"
		}
		out = append(out, lk)
	}
	return out, fences, nil
}
