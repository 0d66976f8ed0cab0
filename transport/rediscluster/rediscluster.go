// Package rediscluster is the transport to one Redis Cluster, which the
// engine counts as one master: Redlock over N independent clusters keeps
// the quorum argument (each cluster is one vote) while every cluster
// spreads its keys over its shards.
//
// Inside, each shard master is reached by its own transport/redis
// Transport (one ordered, pipelined connection per node, with its scripts,
// NOSCRIPT resend, auth and TLS). Do splits a batch by the slot of each
// op's key, sends the parts to their shards concurrently, each as one
// pipeline, and keeps slice order per key: a key lives in one slot, so all
// of a batch's ops on it go, in order, down one connection. MOVED and ASK
// replies are followed (ASK with ASKING), under the contract's resend rule,
// and TRYAGAIN replies (a multi-key op on a slot half moved) are retried
// after a short delay within the batch's deadline.
//
// Restart quarantine is per shard: the transport is a
// transport.ShardReporter. DoServed reports, for every op, the shard master
// that gave its result (after MOVED and ASK, the one redirected to) and that
// shard's connection epoch around the round trip; ShardInfo reads one
// shard's run id and uptime. The engine's node actor then keeps a shard that
// restarted empty from voting for the keys it serves until its quarantine
// ends, while the cluster's other shards go on voting.
//
// The transport is also a transport.ServerReporter that describes the
// cluster as one server: its run id is the set of its masters' run ids and
// its uptime the least of theirs, with an epoch that moves whenever any
// shard connection or the set of masters changes (see ServerInfo and
// Epoch). The engine uses it to find two entries that are one cluster; a
// wrapper that forwards only ServerReporter gets the coarser quarantine of
// the whole cluster, safe by the same proof.
package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/internal/opkeys"
	"github.com/quorumlock/redlock/transport/redis"
)

// Slots is the number of hash slots of every Redis Cluster.
const Slots = 16384

// maxRedirects bounds how often one op follows MOVED or ASK in one Do.
const maxRedirects = 5

// TRYAGAIN retries (see Do): the first delay, doubled per retry up to
// tryAgainMax; and how long one Do goes on retrying at most, whatever ctx's
// deadline. The budget bounds what the retries cost the batch's other ops,
// whose replies wait with them (a grant's validity counts from the send):
// the engine's master timeout may be as long as the TTL. Redis Cluster
// clients retry a few times over some 100ms (redis-py: 3 times, 50ms
// apart); a migration of a slot with a few keys takes milliseconds.
const (
	tryAgainFirst  = 2 * time.Millisecond
	tryAgainMax    = 50 * time.Millisecond
	tryAgainBudget = 200 * time.Millisecond
)

// ErrFailoverRisk: the cluster's masters have replicas, and Config's
// AllowFailover (URL: ?allow-failover=true) was not given.
var ErrFailoverRisk = errors.New("cluster masters have replicas that may fail over and lose acknowledged keys")

// ErrCrossSlot is wrapped (with transport.ErrInvalidOp) by the error for an
// op whose keys lie in different slots.
var ErrCrossSlot = errors.New("keys in different cluster slots")

// Slot is the cluster hash slot of key (CRC16 of its hash tag, or of the
// whole key when it has none), as radix.ClusterSlot computes it, over the
// string itself: converting each key to []byte cost an allocation per op.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[k]]
	}
	return int(crc % Slots)
}

// crcTable is CRC16-CCITT (XMODEM, polynomial 0x1021), Redis Cluster's.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// FenceKey is the name of key's fencing counter on a cluster
// (redis.ClusterFenceKey): in key's slot.
func FenceKey(key string) string { return redis.ClusterFenceKey(key) }

// checkKey reports why key cannot be a lock key on a cluster: one that
// could be a fencing counter's name.
func checkKey(key string) error {
	if strings.HasPrefix(key, redis.ClusterFencePrefix) {
		return fmt.Errorf("key %q starts with %q, the prefix of fencing counters on a cluster; choose another name", key, redis.ClusterFencePrefix)
	}
	return nil
}

// CheckFence reports why key cannot be fenced on a cluster, or nil.
func CheckFence(key string) error {
	if !redis.HasHashTag(key) && strings.Contains(key, "}") {
		return fmt.Errorf("key %q has a '}' but no hash tag, so its fencing counter cannot be named into its slot; give it a hash tag, as in {%s}", key, strings.ReplaceAll(key, "}", ""))
	}
	return nil
}

// CheckKeys reports why a lock on keys (fenced or not) cannot run on a
// cluster: keys of different slots (a multi-key op is one script on one
// shard), or a fenced key whose counter cannot share its slot. The engine
// calls it before it sends anything, so that the caller gets the reason.
func CheckKeys(keys []string, fenced bool) error {
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	if fenced {
		for _, k := range keys {
			if err := CheckFence(k); err != nil {
				return err
			}
		}
	}
	if len(keys) < 2 {
		return nil
	}
	s := Slot(keys[0])
	for _, k := range keys[1:] {
		if Slot(k) != s {
			return fmt.Errorf("%w: %q is in slot %d and %q in slot %d; a lock on several keys of a cluster needs them in one slot: give them one hash tag, as in {order:42}:a and {order:42}:b",
				ErrCrossSlot, keys[0], s, k, Slot(k))
		}
	}
	return nil
}

// topo is one reading of the slot map. It is never changed once published.
type topo struct {
	owner    [Slots]int16 // index into masters; -1: no master owns the slot
	masters  []string     // sorted
	slots    []int        // slots owned, per master
	replicas map[string]int
	from     string // the node that answered CLUSTER SLOTS
}

func (tp *topo) isMaster(addr string) bool {
	_, ok := slices.BinarySearch(tp.masters, addr)
	return ok
}

// tagOf is a hash tag, "{n}", whose keys hash to a slot that master m of
// tp owns, or "" when it owns none. (The tags {0} to {109757} cover every
// slot.)
func (tp *topo) tagOf(m int) string {
	if tp.slots[m] == 0 {
		return ""
	}
	for n := range 1 << 20 {
		if tag := strconv.Itoa(n); tp.owner[Slot(tag)] == int16(m) {
			return "{" + tag + "}"
		}
	}
	return ""
}

func (tp *topo) replicaCount() int {
	n := 0
	for _, r := range tp.replicas {
		n += r
	}
	return n
}

// Transport is one Redis Cluster.
type Transport struct {
	cfg  Config
	name string

	mu     sync.Mutex
	closed bool
	nodes  map[string]*redis.Transport
	// base moves whenever the set of masters changes, so that Epoch does.
	base    uint64
	topoErr error

	topo      atomic.Pointer[topo]
	firstDone chan struct{}
	syncReq   chan chan struct{}
	kick      chan struct{}
	loopCtx   context.Context
	cancel    context.CancelFunc
	loopDone  chan struct{}
	refreshes atomic.Int64
	moved     atomic.Int64
	asked     atomic.Int64
	// handoffs: per node address, see Handoffs (under mu).
	handoffs map[string]uint64
	tryAgain atomic.Int64
}

// TryAgains counts the rounds of a Do that resent ops after TRYAGAIN.
func (t *Transport) TryAgains() int64 { return t.tryAgain.Load() }

// Redirects counts the ops resent after MOVED and after ASK so far.
func (t *Transport) Redirects() (moved, ask int64) { return t.moved.Load(), t.asked.Load() }

// New validates cfg and returns a transport that reads the slot map in the
// background; the cluster need not be up yet.
func New(cfg Config) (*Transport, error) {
	if len(cfg.Seeds) == 0 {
		return nil, fmt.Errorf("%w: a cluster needs at least one seed node", redis.ErrBadAddress)
	}
	for _, s := range cfg.Seeds {
		n := cfg.Node
		n.Addr = s
		if _, err := redis.ParseAddr(s); err != nil {
			return nil, err
		}
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Second
	}
	cfg.Node.ClusterFenceKeys = true
	t := &Transport{
		cfg:       cfg,
		name:      Scheme + "://" + strings.Join(cfg.Seeds, ","),
		nodes:     make(map[string]*redis.Transport),
		handoffs:  make(map[string]uint64),
		firstDone: make(chan struct{}),
		syncReq:   make(chan chan struct{}),
		kick:      make(chan struct{}, 1),
		loopDone:  make(chan struct{}),
		topoErr:   fmt.Errorf("%w: %s: no slot map yet", transport.ErrUnavailable, Scheme),
	}
	if cfg.Node.TLS {
		t.name = SchemeTLS + "://" + strings.Join(cfg.Seeds, ",")
	}
	for _, s := range cfg.Seeds {
		if _, err := t.node(s); err != nil {
			t.Close()
			return nil, err
		}
	}
	t.loopCtx, t.cancel = context.WithCancel(context.Background())
	go t.loop()
	return t, nil
}

// Dial is New, then waits (within ctx) for the slot map and a connection to
// every master. If that fails, the transport is closed and the error
// returned.
func Dial(ctx context.Context, cfg Config) (*Transport, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	tp, err := t.current(ctx)
	if err == nil {
		for _, m := range tp.masters {
			var n *redis.Transport
			if n, err = t.node(m); err == nil {
				err = n.Ping(ctx)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Name is the cluster's scheme and seed nodes, without credentials.
func (t *Transport) Name() string { return t.name }

// Capabilities are those of the per-node Redis transport: every op kind it
// implements runs here too, routed by its key's slot.
func (t *Transport) Capabilities() transport.Capabilities {
	return (*redis.Transport)(nil).Capabilities()
}

// node returns the transport of the node at addr, making it on first use.
func (t *Transport) node(addr string) (*redis.Transport, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("%w: %s", transport.ErrClosed, t.name)
	}
	if n := t.nodes[addr]; n != nil {
		return n, nil
	}
	c := t.cfg.Node
	c.Addr = addr
	n, err := redis.New(c)
	if err != nil {
		return nil, err
	}
	t.nodes[addr] = n
	return n, nil
}

// Close stops the slot map reader and closes every node's transport.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	nodes := t.nodes
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
		<-t.loopDone
	}
	for _, n := range nodes {
		n.Close()
	}
	return nil
}

// Epoch moves whenever any node's connection does (each node transport's
// epoch counts its connections, and only grows) or the set of masters
// changes. So an Epoch read before and after a Do that reads the same
// value means every shard that served the Do was the master of its slots
// in the topology of that epoch, on the connection of that epoch.
func (t *Transport) Epoch() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.base
	for _, n := range t.nodes {
		e += n.Epoch()
	}
	return e
}

// ServerInfo describes the cluster as one server: its run id is the sorted
// run ids of the masters of the current slot map, its uptime the least of
// theirs, its Eviction and ReplicaOf the first shard's that has one, its
// Evicted the sum of theirs (a shard's count that moves moves the sum, and
// the run id names the same processes only while the shards are the same).
// A shard that restarted (a new run id) or a new master (a
// failover, a node added) thus changes the cluster's run id, and the
// engine's restart quarantine applies to the cluster. It fails if any
// master cannot be read, or while the cluster is refused (ErrFailoverRisk).
func (t *Transport) ServerInfo(ctx context.Context) (transport.ServerInfo, error) {
	tp, err := t.current(ctx)
	if err != nil {
		return transport.ServerInfo{}, err
	}
	infos, errs := t.shardInfos(ctx, tp)
	if err := errors.Join(errs...); err != nil {
		return transport.ServerInfo{}, err
	}
	ids := make([]string, len(infos))
	var si transport.ServerInfo
	for i, in := range infos {
		ids[i] = in.RunID
		if i == 0 || in.Uptime < si.Uptime {
			si.Uptime = in.Uptime
		}
		// A shard that evicts (or, a master of the slot map, replicates)
		// can lose keys of the whole cluster's locks.
		if in.Eviction != "" && si.Eviction == "" {
			si.Eviction = "shard " + tp.masters[i] + ": " + in.Eviction
		}
		if in.ReplicaOf != "" && si.ReplicaOf == "" {
			si.ReplicaOf = in.ReplicaOf
		}
		si.Evicted += in.Evicted
	}
	slices.Sort(ids)
	si.RunID = "cluster:" + strings.Join(ids, ",")
	return si, nil
}

// ShardNames are the masters of the current slot map (none before the
// first map), the shards that serve ops now.
func (t *Transport) ShardNames() []string {
	tp := t.topo.Load()
	if tp == nil {
		return nil
	}
	return slices.Clone(tp.masters)
}

// Handoffs counts the slots that a new slot map gave from shard to another
// node, and the ops shard redirected that were resent elsewhere (see
// transport.ShardReporter).
func (t *Transport) Handoffs(shard string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handoffs[shard]
}

func (t *Transport) handoff(shard string) {
	t.mu.Lock()
	t.handoffs[shard]++
	t.mu.Unlock()
}

// ShardEpoch is the epoch of the connection to shard (an address), 0
// before the transport first made one.
func (t *Transport) ShardEpoch(shard string) uint64 {
	t.mu.Lock()
	n := t.nodes[shard]
	t.mu.Unlock()
	if n == nil {
		return 0
	}
	return n.Epoch()
}

// ShardInfo reads the run id and uptime of the node at shard (an address),
// whether or not it is a master of the current slot map.
func (t *Transport) ShardInfo(ctx context.Context, shard string) (transport.ServerInfo, error) {
	n, err := t.node(shard)
	if err != nil {
		return transport.ServerInfo{}, err
	}
	return n.ServerInfo(ctx)
}

func (t *Transport) shardInfos(ctx context.Context, tp *topo) ([]transport.ServerInfo, []error) {
	infos := make([]transport.ServerInfo, len(tp.masters))
	errs := make([]error, len(tp.masters))
	var wg sync.WaitGroup
	for i, m := range tp.masters {
		n, err := t.node(m)
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Go(func() { infos[i], errs[i] = n.ServerInfo(ctx) })
	}
	wg.Wait()
	return infos, errs
}

// current waits (within ctx) for the first slot map and returns the
// newest, or why there is none or the cluster is refused.
func (t *Transport) current(ctx context.Context) (*topo, error) {
	select {
	case <-t.firstDone:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s: no slot map yet: %w", transport.ErrUnavailable, t.name, ctx.Err())
	}
	tp := t.topo.Load()
	if tp == nil {
		t.mu.Lock()
		err := t.topoErr
		t.mu.Unlock()
		return nil, err
	}
	if !t.cfg.AllowFailover && tp.replicaCount() > 0 {
		return nil, fmt.Errorf("%w: %s has %d replicas; a promoted replica may lack keys its master acknowledged, which lets two holders in; remove the replicas (or set cluster-replica-no-failover yes and accept that with ?allow-failover=true)",
			ErrFailoverRisk, t.name, tp.replicaCount())
	}
	return tp, nil
}

// loop reads the slot map at start, every RefreshInterval, when kicked, and
// when a Do waits for it (refreshNow).
func (t *Transport) loop() {
	defer close(t.loopDone)
	tick := time.NewTicker(t.cfg.RefreshInterval)
	defer tick.Stop()
	var waiters []chan struct{}
	first := true
	for {
		t.refresh()
		for _, w := range waiters {
			close(w)
		}
		waiters = waiters[:0]
		if first {
			close(t.firstDone)
			first = false
		}
		select {
		case <-t.loopCtx.Done():
			return
		case <-tick.C:
		case <-t.kick:
		case w := <-t.syncReq:
			waiters = append(waiters, w)
		}
	drain:
		for {
			select {
			case w := <-t.syncReq:
				waiters = append(waiters, w)
			case <-t.kick:
			default:
				break drain
			}
		}
	}
}

// refreshNow asks for a new slot map and waits for it (within ctx).
func (t *Transport) refreshNow(ctx context.Context) {
	w := make(chan struct{})
	select {
	case t.syncReq <- w:
	case <-ctx.Done():
		return
	case <-t.loopDone:
		return
	}
	select {
	case <-w:
	case <-ctx.Done():
	}
}

// refreshSoon asks for a new slot map without waiting.
func (t *Transport) refreshSoon() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// refresh reads CLUSTER SLOTS from the first node that answers: the known
// masters, then the seeds.
func (t *Transport) refresh() {
	t.refreshes.Add(1)
	var ask []string
	if tp := t.topo.Load(); tp != nil {
		ask = append(ask, tp.masters...)
	}
	for _, s := range t.cfg.Seeds {
		if !slices.Contains(ask, s) {
			ask = append(ask, s)
		}
	}
	var errs []error
	for _, addr := range ask {
		n, err := t.node(addr)
		if err != nil {
			return // closed
		}
		ctx, cancel := context.WithTimeout(t.loopCtx, max(t.cfg.Node.DialTimeout, redis.DefaultDialTimeout)+max(t.cfg.Node.OpTimeout, redis.DefaultOpTimeout))
		var tt radix.ClusterTopo
		err = n.Cmd(ctx, &tt, "CLUSTER", "SLOTS")
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		tp, err := buildTopo(tt, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.install(tp)
		return
	}
	if t.loopCtx.Err() != nil {
		return
	}
	t.mu.Lock()
	t.topoErr = fmt.Errorf("%w: %s: cannot read the slot map (CLUSTER SLOTS): %w", transport.ErrUnavailable, t.name, errors.Join(errs...))
	t.mu.Unlock()
}

func buildTopo(tt radix.ClusterTopo, from string) (*topo, error) {
	tp := &topo{replicas: map[string]int{}, from: from}
	// A node that does not know its own address (a cluster of one node,
	// which never met another) lists itself with an empty host: it is the
	// node we asked.
	fromHost, _, _ := net.SplitHostPort(from)
	fix := func(addr string) string {
		if h, p, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "?") {
			return net.JoinHostPort(fromHost, p)
		}
		return addr
	}
	for i := range tt {
		tt[i].Addr, tt[i].SecondaryOfAddr = fix(tt[i].Addr), fix(tt[i].SecondaryOfAddr)
	}
	for _, n := range tt {
		if n.SecondaryOfAddr != "" {
			tp.replicas[n.SecondaryOfAddr]++
			continue
		}
		if _, err := redis.ParseAddr(n.Addr); err != nil {
			return nil, fmt.Errorf("%s: CLUSTER SLOTS lists master %q: %w", from, n.Addr, err)
		}
		if !slices.Contains(tp.masters, n.Addr) {
			tp.masters = append(tp.masters, n.Addr)
		}
	}
	slices.Sort(tp.masters)
	tp.slots = make([]int, len(tp.masters))
	for i := range tp.owner {
		tp.owner[i] = -1
	}
	for _, n := range tt {
		if n.SecondaryOfAddr != "" {
			continue
		}
		m, _ := slices.BinarySearch(tp.masters, n.Addr)
		for _, r := range n.Slots {
			// radix's ranges end exclusive.
			for s := int(r[0]); s < int(r[1]) && s < Slots; s++ {
				tp.owner[s] = int16(m)
				tp.slots[m]++
			}
		}
	}
	if len(tp.masters) == 0 {
		return nil, fmt.Errorf("%s: CLUSTER SLOTS lists no master (is cluster-enabled on, and are slots assigned?)", from)
	}
	return tp, nil
}

// install publishes tp, moving the epoch first when its masters differ from
// the last map's, under the same lock Epoch reads: no op can reach a new
// master before the epoch that shows it.
func (t *Transport) install(tp *topo) {
	for _, m := range tp.masters {
		if _, err := t.node(m); err != nil {
			return // closed: masters were checked by buildTopo
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	old := t.topo.Load()
	if old == nil || !slices.Equal(old.masters, tp.masters) {
		t.base++
	}
	if old != nil {
		// Before the map is published: a shard's keys reach their new
		// owner only after the count that says so.
		for s := range tp.owner {
			if o := old.owner[s]; o >= 0 && (tp.owner[s] < 0 || tp.masters[tp.owner[s]] != old.masters[o]) {
				t.handoffs[old.masters[o]]++
			}
		}
	}
	t.topo.Store(tp)
}

// Refreshes counts the slot map reads so far (for tests and status).
func (t *Transport) Refreshes() int64 { return t.refreshes.Load() }

// check is transport.Check plus the cluster's own rules: one slot per op,
// and a fencing counter that can share its key's slot. It returns the
// op's slot.
func check(op *transport.Op) (int, error) {
	if err := transport.Check(op); err != nil {
		return 0, err
	}
	fenced := op.Kind == transport.AcquireFenced || op.Kind == transport.RaiseFence
	if len(op.Keys) < 2 {
		// The common case, without building a key list.
		if err := checkKey(op.Key); err != nil {
			return 0, fmt.Errorf("%w: %s: %w", transport.ErrInvalidOp, op.Kind, err)
		}
		if fenced {
			if err := CheckFence(op.Key); err != nil {
				return 0, fmt.Errorf("%w: %s: %w", transport.ErrInvalidOp, op.Kind, err)
			}
		}
		return Slot(op.Key), nil
	}
	if err := CheckKeys(op.Keys, fenced); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", transport.ErrInvalidOp, op.Kind, err)
	}
	return Slot(op.Keys[0]), nil
}

// redirect is a MOVED or ASK reply: the op was not applied, and addr may
// apply it.
type redirect struct {
	ask  bool
	addr string
}

func redirectOf(err error) (redirect, bool) {
	var se resp3.SimpleError
	if err == nil || !errors.As(err, &se) {
		return redirect{}, false
	}
	if isTryAgain(se) {
		return redirect{}, false
	}
	f := strings.Fields(se.S)
	if len(f) != 3 || (f[0] != "MOVED" && f[0] != "ASK") {
		return redirect{}, false
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return redirect{}, false
	}
	return redirect{ask: f[0] == "ASK", addr: f[2]}, true
}

// isTryAgain: a multi-key command on a slot being migrated whose keys are
// not all on the node asked (the lock key and its fencing counter split
// between source and target). Redis refuses it before running anything.
func isTryAgain(se resp3.SimpleError) bool { return strings.HasPrefix(se.S, "TRYAGAIN") }

func tryAgainOf(err error) bool {
	var se resp3.SimpleError
	return err != nil && errors.As(err, &se) && isTryAgain(se)
}

// resendable: the op was refused unapplied and may go again (MOVED, ASK,
// TRYAGAIN).
func resendable(err error) bool {
	_, ok := redirectOf(err)
	return ok || tryAgainOf(err)
}

// part is the ops of one batch that go to one node in one round.
type part struct {
	addr   string
	asking bool
	idx    []int
	// again: the ops met TRYAGAIN on addr and go back there (with any op
	// of their keys redirected behind them, held back in order; see
	// redirects' place).
	again bool
}

// Do routes each op to the master of its slot, sends each shard's part as
// one pipeline, all shards at once, and follows MOVED and ASK.
//
// The resend rule (package transport): an op that met MOVED or ASK was not
// applied, and is sent again to the node named only if no later op of its
// part that may have run (any reply but a redirect) touches one of its
// keys on the server (a write-back touches its fencing counter alone, a
// fenced acquire its key and counter; see opkeys.Server); otherwise it fails.
// Redirected ops of one key go on together, in order, to one node; so
// slice order per key holds. An op redirected behind an earlier op of its
// key that goes back after TRYAGAIN follows that op, in order, and is
// resent where its redirect points once that op stops retrying.
//
// TRYAGAIN (a multi-key op, such as a fenced acquire over its key and
// counter, on a slot being migrated with its keys split between source and
// target) is refused unapplied too: such ops go back to the same node, under
// the same rule, after a short delay that doubles from 2ms to 50ms, while
// ctx's deadline leaves room for the delay, for at most 200ms in all; then
// the TRYAGAIN stays the op's error, which the engine treats as any failed
// op (cleanup, retry).
func (t *Transport) Do(ctx context.Context, ops []transport.Op, results []transport.Result) error {
	return t.do(ctx, ops, results, nil)
}

// DoServed is Do, and fills served[i] with the shard master (its address)
// that gave results[i] and that shard's epoch around the round trip that
// gave it, transport.Unvetted if its connection changed meanwhile (see
// transport.ShardReporter). An op redirected by MOVED or ASK is served by
// the node it was resent to.
func (t *Transport) DoServed(ctx context.Context, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	if len(served) != len(ops) {
		err := fmt.Errorf("%w: %d ops but %d served", transport.ErrInvalidOp, len(ops), len(served))
		return transport.Fail(results[:min(len(ops), len(results))], err)
	}
	clear(served)
	return t.do(ctx, ops, results, served)
}

func (t *Transport) do(ctx context.Context, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	if len(results) != len(ops) {
		err := fmt.Errorf("%w: %d ops but %d results", transport.ErrInvalidOp, len(ops), len(results))
		return transport.Fail(results[:min(len(ops), len(results))], err)
	}
	if t.isClosed() {
		return transport.Fail(results, fmt.Errorf("%w: %s", transport.ErrClosed, t.name))
	}
	valid := 0
	slot := make([]int, len(ops))
	for i := range ops {
		s, err := check(&ops[i])
		results[i] = transport.Result{Err: err}
		slot[i] = s
		if err == nil {
			valid++
		}
	}
	if valid == 0 {
		return nil
	}
	tp, err := t.current(ctx)
	if err == nil {
		if err = ctx.Err(); err != nil {
			err = fmt.Errorf("%s: not sent: %w", t.name, err)
		}
	}
	if err != nil {
		return failValid(results, err)
	}
	byAddr := map[string]*part{}
	var parts []*part
	for i := range ops {
		if results[i].Err != nil {
			continue
		}
		m := tp.owner[slot[i]]
		if m < 0 {
			results[i].Err = fmt.Errorf("%w: %s: slot %d has no master (CLUSTERDOWN)", transport.ErrUnavailable, t.name, slot[i])
			t.refreshSoon()
			continue
		}
		addr := tp.masters[m]
		p := byAddr[addr]
		if p == nil {
			p = &part{addr: addr}
			byAddr[addr] = p
			parts = append(parts, p)
		}
		p.idx = append(p.idx, i)
	}
	var first error
	redirs := 0
	delay := tryAgainFirst
	budget := time.Now().Add(tryAgainBudget)
	for round := 0; len(parts) > 0; round++ {
		all, err := t.send(ctx, parts, ops, results, served)
		if round > 0 {
			t.lateResend(parts, results)
		}
		if round == 0 && all && len(parts) == len(byAddr) && valid == countValid(parts) {
			// Every shard's part failed as a whole: so did the batch.
			first = err
		}
		again := mayTryAgain(ctx, delay, budget)
		var redirected bool
		parts, redirected = t.redirects(ctx, parts, ops, results, redirs, again)
		if redirected {
			redirs++
		}
		if slices.ContainsFunc(parts, func(p *part) bool { return p.again }) {
			// TRYAGAIN: the slot's move is under way; wait a little, as
			// Redis Cluster clients do, and send again. This runs on the
			// caller's goroutine (the node actor's I/O goroutine, never
			// the actor itself) and ends with ctx, so the wait costs the
			// batch no more than its deadline.
			if !sleepCtx(ctx, delay) {
				break // the ops keep their TRYAGAIN errors
			}
			t.tryAgain.Add(1)
			delay = min(2*delay, tryAgainMax)
		}
	}
	return first
}

// lateResend relabels the ops of a resend (after MOVED, ASK or TRYAGAIN)
// that their node's transport did not send because the deadline had passed
// (transport.ErrNotSent). That error tells the engine no master saw the op
// and the lateness was this process's, and the engine retries such an
// acquire without counting the attempt; but a node did see these in an
// earlier round, and the deadline went on the cluster's round trips (the
// redirect, the slot-map refresh before the resend). They failed for want
// of an answer in time, as ops a master did not answer.
func (t *Transport) lateResend(parts []*part, results []transport.Result) {
	for _, p := range parts {
		for _, i := range p.idx {
			if err := results[i].Err; err != nil && errors.Is(err, transport.ErrNotSent) {
				results[i].Err = fmt.Errorf("%s: resent after a redirect, too late (%v): %w", t.name, err, context.DeadlineExceeded)
			}
		}
	}
}

// mayTryAgain: another TRYAGAIN retry, after delay, fits before ctx's
// deadline and within the Do's budget (which ends at budget).
func mayTryAgain(ctx context.Context, delay time.Duration, budget time.Time) bool {
	if ctx.Err() != nil || time.Until(budget) < delay {
		return false
	}
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl) > delay
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func countValid(parts []*part) int {
	n := 0
	for _, p := range parts {
		n += len(p.idx)
	}
	return n
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// send runs every part on its node at once and waits for all of them. It
// reports whether every part failed as a whole, and one such error.
func (t *Transport) send(ctx context.Context, parts []*part, ops []transport.Op, results []transport.Result, served []transport.Served) (bool, error) {
	errs := make([]error, len(parts))
	run := func(pi int) {
		p := parts[pi]
		n, err := t.node(p.addr)
		if err != nil {
			errs[pi] = err
			for _, i := range p.idx {
				results[i] = transport.Result{Err: err}
			}
			return
		}
		sub, res := ops, results
		if len(p.idx) != len(ops) {
			// Part of the batch: its own slices. (A part of every op is
			// the whole batch, in order: it goes as it is.)
			sub = make([]transport.Op, len(p.idx))
			res = make([]transport.Result, len(p.idx))
			for j, i := range p.idx {
				sub[j] = ops[i]
			}
		}
		// The epoch is read before the part goes and after it returns:
		// equal, the part went down that one connection, to the process
		// that ShardInfo after the first read describes (or to an older
		// one, never a newer one, which is what vetting needs).
		e0 := n.Epoch()
		if p.asking {
			errs[pi] = n.DoAsking(ctx, sub, res)
		} else {
			errs[pi] = n.Do(ctx, sub, res)
		}
		if served != nil && n.Epoch() != e0 {
			e0 = transport.Unvetted
		}
		for j, i := range p.idx {
			results[i] = res[j]
			if served != nil {
				// A resent op overwrites its earlier shard: the last node
				// that answered it served it.
				served[i] = transport.Served{Shard: p.addr, Epoch: e0}
			}
			if res[j].Err != nil && errors.Is(res[j].Err, transport.ErrUnavailable) {
				// A master down may have failed over: read the map again.
				t.refreshSoon()
			}
		}
	}
	var wg sync.WaitGroup
	for pi := range parts[1:] {
		wg.Go(func() { run(pi + 1) })
	}
	run(0)
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return false, nil
		}
	}
	return true, errs[0]
}

var errNotResent = fmt.Errorf("redirected (MOVED or ASK), and not resent: a later op of the batch on the same key may have run, and a resend would run after it: %w", transport.ErrNotApplied)

// redirects applies the resend rule to the parts just sent and returns the
// parts of the next round, and whether it follows a MOVED or ASK. Ops that
// met TRYAGAIN go back to the node that answered it (parts marked again)
// when again allows, under the same rule: Redis refused them unapplied.
func (t *Transport) redirects(ctx context.Context, parts []*part, ops []transport.Op, results []transport.Result, round int, again bool) ([]*part, bool) {
	var next []*part
	type dest struct {
		addr  string
		ask   bool
		again bool
	}
	refreshed, redirected := false, false
	for _, p := range parts {
		any := false
		for _, i := range p.idx {
			if resendable(results[i].Err) {
				any = true
				break
			}
		}
		if !any {
			continue
		}
		ran := map[string]bool{}
		resend := make([]bool, len(p.idx))
		for j := len(p.idx) - 1; j >= 0; j-- {
			i := p.idx[j]
			if !resendable(results[i].Err) {
				for _, k := range opkeys.Server(&ops[i], FenceKey) {
					ran[k] = true
				}
				continue
			}
			if tryAgainOf(results[i].Err) {
				if !again {
					results[i].Err = fmt.Errorf("%s: slot %d is being migrated and the op's keys are split between its nodes; retried for as long as the op's deadline and the retry budget allow: %w", t.name, Slot(opkeys.Of(&ops[i])[0]), results[i].Err)
					continue
				}
			} else if round >= maxRedirects {
				continue // the redirect stays the op's error
			}
			touched := false
			for _, k := range opkeys.Server(&ops[i], FenceKey) {
				touched = touched || ran[k]
			}
			if touched {
				results[i].Err = fmt.Errorf("%s: %w (%w)", t.name, errNotResent, results[i].Err)
				continue
			}
			resend[j] = true
		}
		keyDest := map[string]dest{}
		byDest := map[dest]*part{}
		// place puts op i in the next round's part for d, unless one of
		// its keys already goes elsewhere (slice order per key would break):
		// then it is not resent. It reports where op i went.
		//
		// One exception: an earlier op of the same key goes back after
		// TRYAGAIN (on a slot being moved, a fenced acquire whose key and
		// counter are split, retried for a short while) and op i met a
		// redirect. Failing op i lost releases on a slot left half moved
		// (ask21): [AcquireFenced(k), Release(k)], the release's key on
		// the importing node. Op i follows the earlier op instead, in
		// order, to the same node; it meets the same redirect there, and
		// goes where it points once the earlier op is done retrying.
		place := func(i int, d dest) (dest, bool) {
			keys := opkeys.Server(&ops[i], FenceKey)
			var follow *dest
			for _, k := range keys {
				prev, ok := keyDest[k]
				switch {
				case !ok || prev == d:
					continue
				case prev.again && !d.again && (follow == nil || *follow == prev):
					follow = &prev
					continue
				}
				results[i].Err = fmt.Errorf("%s: %w (%w)", t.name, errNotResent, results[i].Err)
				return dest{}, false
			}
			if follow != nil {
				// Every key of op i that goes anywhere goes there.
				for _, k := range keys {
					if prev, ok := keyDest[k]; ok && prev != *follow {
						results[i].Err = fmt.Errorf("%s: %w (%w)", t.name, errNotResent, results[i].Err)
						return dest{}, false
					}
				}
				d = *follow
			}
			for _, k := range keys {
				keyDest[k] = d
			}
			np := byDest[d]
			if np == nil {
				np = &part{addr: d.addr, asking: d.ask, again: d.again}
				byDest[d] = np
				next = append(next, np)
			}
			np.idx = append(np.idx, i)
			return d, true
		}
		for j, i := range p.idx {
			if !resend[j] {
				continue
			}
			if tryAgainOf(results[i].Err) {
				// Back to the same node, as it was asked (the target of
				// an ASK is asked with ASKING again).
				place(i, dest{p.addr, p.asking, true})
				continue
			}
			r, _ := redirectOf(results[i].Err)
			d := dest{r.addr, r.ask, false}
			if !r.ask {
				// MOVED: the slot map is stale; read it before the
				// resend, so that later batches go straight there.
				if !refreshed {
					t.refreshNow(ctx)
					refreshed = true
				}
			}
			tp := t.topo.Load()
			if tp == nil || !tp.isMaster(r.addr) {
				if !refreshed {
					t.refreshNow(ctx)
					refreshed = true
					tp = t.topo.Load()
				}
				if tp == nil || !tp.isMaster(r.addr) {
					// Only masters of the current map serve ops, so that
					// the epoch vouches for every node that answered.
					results[i].Err = fmt.Errorf("%w: %s: redirected to %s, which is not a master of the slot map", transport.ErrUnavailable, t.name, r.addr)
					continue
				}
			}
			went, ok := place(i, d)
			if !ok || went.again {
				// Not resent, or held back behind an op retried after
				// TRYAGAIN: no redirect followed yet (nor counted
				// against maxRedirects, as the retries may take rounds).
				continue
			}
			redirected = true
			// Before the resend: the op leaves p's shard for another.
			t.handoff(p.addr)
			if d.ask {
				t.asked.Add(1)
			} else {
				t.moved.Add(1)
			}
		}
	}
	return next, redirected
}

func failValid(results []transport.Result, err error) error {
	for i := range results {
		if results[i].Err == nil {
			results[i] = transport.Result{Err: err}
		}
	}
	return err
}

// CheckKeys is the package's CheckKeys, as a method for the engine, which
// asks every transport that has it before it sends a lock's first op.
func (t *Transport) CheckKeys(keys []string, fenced bool) error { return CheckKeys(keys, fenced) }

// ShardStatus is what Shards reports about one master of the slot map.
type ShardStatus struct {
	Addr string
	// Slots is how many of the 16384 slots the master owns; Replicas how
	// many replicas CLUSTER SLOTS lists for it.
	Slots, Replicas int
	// Reachable: it answered PING, in RTT.
	Reachable bool
	RTT       time.Duration
	// Info is its run id and uptime (when Err is nil).
	Info transport.ServerInfo
	Err  error
	// Tag is a hash tag ("{n}") whose keys hash to a slot the master
	// owns in this slot map, "" when it owns none: a key that contains it
	// goes to this master (while the map holds), as a probe must.
	Tag string
}

// Shards reads the slot map (waiting, within ctx, for the first one) and
// asks every master for PING and INFO, all at once: the rows of redlock
// status. It reports the shards even when the cluster is refused for its
// replicas (ErrFailoverRisk), which it then also returns.
func (t *Transport) Shards(ctx context.Context) ([]ShardStatus, error) {
	select {
	case <-t.firstDone:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s: no slot map: %w", transport.ErrUnavailable, t.name, ctx.Err())
	}
	tp := t.topo.Load()
	if tp == nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		return nil, t.topoErr
	}
	out := make([]ShardStatus, len(tp.masters))
	var wg sync.WaitGroup
	for i, m := range tp.masters {
		out[i] = ShardStatus{Addr: m, Slots: tp.slots[i], Replicas: tp.replicas[m], Tag: tp.tagOf(i)}
		n, err := t.node(m)
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Go(func() {
			s := &out[i]
			start := time.Now()
			if s.Err = n.Ping(ctx); s.Err != nil {
				return
			}
			s.RTT, s.Reachable = time.Since(start), true
			s.Info, s.Err = n.ServerInfo(ctx)
		})
	}
	wg.Wait()
	_, err := t.current(ctx)
	return out, err
}

var (
	_ transport.ServerReporter = (*Transport)(nil)
	_ transport.ShardReporter  = (*Transport)(nil)
)
