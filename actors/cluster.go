// Package actors is the engine's machinery, not an API: users need package
// api (Locker, Lock, options, errors) and package engine (the constructors),
// and nothing here. It is a package of its own, at the top level, so that
// the moving parts can be read and tested apart from the engine's handle
// code; its exported names exist for package engine and may change in any
// release.
//
// It holds one node actor per master and a few coordinator actors sharded
// by key, on protoactor-go.
//
// The path of one call: the caller submits a *Call to the coordinator of its
// key's shard; the coordinator sends one opRequest to every node actor at
// once; each node actor queues it and sends everything queued to its master
// as one batch; the batch's results come back to the node actor, which
// routes them to the coordinators in one message per shard; the coordinator
// counts them into a quorum decision and closes the call's Done channel.
package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// Config is what a Cluster is started from. The engine validates it.
type Config struct {
	Transports []transport.Transport
	Names      []string // one per transport, for error messages
	// RunIDs, if set, are the run ids the masters reported when the
	// engine was built ("" for none): the restart quarantine's first read
	// compares with them (quarantine.seen).
	RunIDs        []string
	MasterTimeout time.Duration
	MaxBatch      int
	MaxInFlight   int
	Coordinators  int
	Logger        *slog.Logger
	// QuarantinePeriod > 0 turns the restart quarantine on (see
	// quarantine.go); CheckInterval is how often masters are re-read.
	QuarantinePeriod time.Duration
	CheckInterval    time.Duration
	// Vet reads the masters' info (transport.ServerReporter) with the
	// quarantine off too, so that one server listed twice, a replica and a
	// master that evicts keys do not vote (quarantine.go, twins.go). Masters
	// born with the engine (engine.NewMemory) need none of it.
	Vet bool
	// Metrics, if not nil, receives the actors' measurements.
	Metrics *Metrics
}

// Cluster is a running set of node and coordinator actors.
type Cluster struct {
	system *actor.ActorSystem
	nodes  []*actor.PID
	coords []*actor.PID
	// coordMBs are the coordinators' mailboxes, by shard: Submit posts a
	// call straight into one (post).
	coordMBs []*mailbox
	timeout  time.Duration
	quorum   int
	io       sync.WaitGroup // batches in flight on their own goroutines

	mu     sync.RWMutex
	closed bool
}

// Start spawns the actors. It does not wait for any master.
func Start(cfg Config) (*Cluster, error) {
	n := len(cfg.Transports)
	if n == 0 || n > api.MaxMasters || len(cfg.Names) != n {
		return nil, fmt.Errorf("%w: %d masters (with %d names): need 1 to %d", api.ErrInvalidArgument, n, len(cfg.Names), api.MaxMasters)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
		// A dead letter that protoactor logs starts a goroutine that lives
		// for this interval. The engine's own late messages skip the log
		// (deadletter.go); anything else that reaches a stopped actor
		// would start it, so it is kept short.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	c := &Cluster{system: system, timeout: cfg.MasterTimeout, quorum: n/2 + 1}
	// Coordinators' PIDs are needed by the nodes (and by each other, for
	// wake-ups) and the other way round, so they learn them through the
	// slice, filled before any call.
	coords := make([]*actor.PID, cfg.Coordinators)
	coordMBs := make([]*mailbox, cfg.Coordinators)
	tw := newTwins(cfg.Names, logger)
	cfg.Metrics.useTwins(tw)
	var peers []peer // the nodes, for the coordinators' bypass
	intakes := make([]*intake, n)
	for i, t := range cfg.Transports {
		intakes[i] = newIntake()
		cfg.Metrics.intake(i, intakes[i])
		nd := &node{index: i, t: t, timeout: cfg.MasterTimeout, maxBatch: cfg.MaxBatch, maxInFlight: cfg.MaxInFlight, coords: coords, coordMBs: coordMBs, wg: &c.io, m: cfg.Metrics, in: intakes[i], immediate: transport.IsImmediate(t)}
		if cfg.QuarantinePeriod > 0 || cfg.Vet {
			sr, server := t.(transport.ServerReporter)
			sh, sharded := t.(transport.ShardReporter)
			if server || sharded {
				nd.q = &quarantine{period: cfg.QuarantinePeriod, interval: cfg.CheckInterval, server: sr, name: cfg.Names[i], index: i, twins: tw, logger: logger}
				if i < len(cfg.RunIDs) {
					nd.q.seen = cfg.RunIDs[i]
				}
				if sharded {
					// Per shard: each shard is a failure domain of its own.
					nd.q.shards = newShards(sh)
				}
			} else if cfg.QuarantinePeriod > 0 {
				logger.Warn("redlock: master's transport is no transport.ServerReporter (it cannot report its run id, uptime and connection epoch), so it is not quarantined after a restart; it must keep its data across restarts", "master", cfg.Names[i])
			}
		}
		// A node's Receive never blocks (I/O is on its workers), so it can
		// run on the sender's goroutine: the coordinator's when it fans out,
		// the worker's when a batch returns. That saves a goroutine wake-up
		// per hop, on the path every lock takes twice.
		bn := &bypass{a: nd}
		var mb actor.Mailbox
		props := actor.PropsFromProducer(func() actor.Actor { return bn }, actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)), actor.WithMailbox(func() actor.Mailbox { mb = withBypass(bn, newMailbox()); return mb }))
		pid, err := restartingRoot(system).SpawnNamed(props, fmt.Sprintf("node-%d", i))
		if err != nil {
			c.stopAll()
			return nil, fmt.Errorf("redlock: spawning node actor %d: %w", i, err)
		}
		c.nodes = append(c.nodes, pid)
		nd.mb = mb.(*mailbox)
		peers = append(peers, peer{pid: pid, mb: mb})
	}
	for i := range coords {
		co := &coordinator{base: time.Now(), shard: int32(i), nodes: c.nodes, intakes: intakes, coords: coords, names: cfg.Names, quorum: c.quorum, masterTimeout: cfg.MasterTimeout, m: cfg.Metrics}
		bc := &bypass{a: co, ctx: bypassCtx{peers: peers}}
		var mb actor.Mailbox
		pid, err := restartingRoot(system).SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return bc }, actor.WithMailbox(func() actor.Mailbox {
			mb = co.recovering(logger, withBypass(bc, loneCallMailbox()))
			co.mb = mb.(*mailbox)
			return mb
		})), fmt.Sprintf("coordinator-%d", i))
		if err != nil {
			c.stopAll()
			return nil, fmt.Errorf("redlock: spawning coordinator %d: %w", i, err)
		}
		coords[i], coordMBs[i] = pid, mb.(*mailbox)
		c.coords = append(c.coords, pid)
	}
	c.coordMBs = coordMBs
	return c, nil
}

// post puts msg, one of the engine's own hot messages (a call, a node's
// replies, a returned batch), into the mailbox of an actor of the
// cluster: what protoactor's Send does for it (the root context's sender
// middleware, of which the engine sets none, then the PID's process, then
// its mailbox) less the PID's resolution and two calls through
// interfaces, on every call and every batch. As with bypassCtx.Send, it
// differs only once the actor has stopped, after Close: protoactor would
// hand msg to its dead letters, which drop these messages without a word
// (deadletter.go), this to the mailbox, whose bypass drops them.
func post(mb *mailbox, msg any) { mb.PostUserMessage(msg) }

// Quorum is the number of masters that must agree.
func (c *Cluster) Quorum() int { return c.quorum }

// Submit hands call to the coordinator of its key. After a nil return,
// call.Done is always closed eventually, even if the cluster closes.
func (c *Cluster) Submit(call *Call) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return api.ErrClosed
	}
	call.hash = keyHash(call.Key)
	call.submitted()
	post(c.coordMBs[c.shard(call)], call)
	return nil
}

// Cancel abandons call with err (the caller's context error). The call's
// Done is closed soon after; the caller must still wait for it, since the
// call may have finished first (and then holds a lock).
func (c *Cluster) Cancel(call *Call, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.closed {
		c.system.Root.Send(c.coords[c.shard(call)], &cancelCall{call: call, gen: call.life, err: err})
	}
}

// ShardOf is the coordinator shard that runs the calls of key.
func (c *Cluster) ShardOf(key string) int {
	return int(keyHash(key) % uint64(len(c.coords))) // as coordinator.shardOf
}

func (c *Cluster) shard(call *Call) int {
	if call.Sem != "" && call.Sem != call.Key {
		return int(keyHash(call.Sem) % uint64(len(c.coords)))
	}
	return int(call.hash % uint64(len(c.coords)))
}

// Close finishes every call in progress with ErrClosed, lets the releases
// that this sends reach the masters (bounded by a few master timeouts), and
// stops every actor and timer. It waits for batches in flight; it does not
// close the transports, which belong to the caller.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return api.ErrClosed
	}
	c.closed = true
	c.mu.Unlock()

	// Coordinators first finish every call (an attempt in flight is
	// released), but stay alive: the nodes still owe them replies, and a
	// reply to a stopped actor would be a dead letter.
	for _, pid := range c.coords {
		d := make(chan struct{})
		c.system.Root.Send(pid, &closeCalls{done: d})
		<-d
	}
	// Then let the nodes send what is queued, cleanup included, bounded
	// in case a master hangs.
	deadline := time.After(4*c.timeout + time.Second)
	for _, pid := range c.nodes {
		d := make(chan struct{})
		c.system.Root.Send(pid, &drainMsg{done: d})
		select {
		case <-d:
		case <-deadline:
		}
	}
	var errs []error
	for _, pid := range append(append([]*actor.PID(nil), c.nodes...), c.coords...) {
		if err := c.system.Root.PoisonFuture(pid).Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	c.io.Wait()
	c.system.Shutdown()
	return errors.Join(errs...)
}

func (c *Cluster) stopAll() {
	defer c.system.Shutdown()
	for _, pid := range c.nodes {
		_ = c.system.Root.PoisonFuture(pid).Wait()
	}
	for _, pid := range c.coords {
		if pid != nil {
			_ = c.system.Root.StopFuture(pid).Wait()
		}
	}
}
