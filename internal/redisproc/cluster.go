package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp/resp3"
)

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// clusterArgs are a cluster node's extra flags: its nodes.conf lives in the
// server's directory, so a restarted node (empty: no persistence) comes back
// as the same node id owning the same slots, the "shard restarts empty"
// fault. Full coverage is not required, so the other shards keep serving
// while one is down. s.mu is held.
func (s *Server) clusterArgs() []string {
	if s.BusPort == 0 {
		return nil
	}
	args := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes-" + strconv.Itoa(s.Port) + ".conf",
		"--cluster-port", strconv.Itoa(s.BusPort),
		"--cluster-node-timeout", "5000",
		"--cluster-require-full-coverage", "no",
	}
	if p := s.announce; p != 0 { // s.mu is held (startLocked)
		args = append(args, "--cluster-announce-port", strconv.Itoa(p), "--cluster-announce-bus-port", strconv.Itoa(s.BusPort))
	}
	return args
}

// Announce makes cluster node s advertise port instead of its own in the
// slot map, MOVED and ASK (cluster-announce-port; its bus port stays): a
// proxy in front of it then sees every client, redirected ones included. It
// applies now (CONFIG SET) and on every Restart; the other nodes learn it by
// gossip (WaitAnnounced).
func (s *Server) Announce(ctx context.Context, port int) error {
	s.mu.Lock()
	s.announce = port
	s.mu.Unlock()
	if err := Cmd(ctx, s.Addr, nil, "CONFIG", "SET", "cluster-announce-bus-port", strconv.Itoa(s.BusPort)); err != nil {
		return fmt.Errorf("redisproc: %s: %w", s.Addr, err)
	}
	if err := Cmd(ctx, s.Addr, nil, "CONFIG", "SET", "cluster-announce-port", strconv.Itoa(port)); err != nil {
		return fmt.Errorf("redisproc: %s: %w", s.Addr, err)
	}
	return nil
}

// WaitAnnounced polls every running node's CLUSTER SLOTS until it lists
// exactly the masters in want (host:port) and nothing else.
func WaitAnnounced(ctx context.Context, servers []*Server, want []string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout*2)
	defer cancel()
	for {
		var last error
		for _, s := range servers {
			if !s.Running() {
				continue
			}
			var tt radix.ClusterTopo
			if err := Cmd(ctx, s.Addr, &tt, "CLUSTER", "SLOTS"); err != nil {
				last = err
				break
			}
			for _, n := range tt {
				if !slices.Contains(want, n.Addr) {
					last = fmt.Errorf("%s lists %s", s.Addr, n.Addr)
					break
				}
			}
			if last != nil {
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: announced addresses not seen: %w (%v)", last, ctx.Err())
		case <-time.After(10 * time.Millisecond): // poll: gossip has no event to wait on
		}
	}
}

// StartCluster starts a Redis Cluster of shards masters (no replicas) on
// free loopback ports, gives each an even range of the slots, joins them
// with CLUSTER MEET and waits, by polling, until every node reports
// cluster_state:ok and knows the whole slot map. The caller stops the
// servers (StopAll).
func StartCluster(ctx context.Context, shards int) ([]*Server, error) {
	if shards < 1 {
		return nil, fmt.Errorf("redisproc: a cluster needs at least one shard, not %d", shards)
	}
	bin, err := LookPath()
	if err != nil {
		return nil, err
	}
	servers := make([]*Server, shards)
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for i := range servers {
		s, err := newServer(bin)
		if err != nil {
			StopAll(servers[:i])
			return nil, err
		}
		if s.BusPort, err = freePort(); err != nil {
			StopAll(servers[:i])
			return nil, err
		}
		servers[i] = s
		wg.Go(func() { errs[i] = s.startOnFreePort(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		StopAll(servers)
		return nil, err
	}
	if err := formCluster(ctx, servers); err != nil {
		StopAll(servers)
		return nil, err
	}
	return servers, nil
}

func newServer(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, err
	}
	return &Server{bin: bin, dir: dir}, nil
}

func formCluster(ctx context.Context, servers []*Server) error {
	for i, s := range servers {
		lo, hi := SlotRange(i, len(servers))
		if err := Cmd(ctx, s.Addr, nil, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("redisproc: %s: CLUSTER ADDSLOTSRANGE: %w", s.Addr, err)
		}
	}
	for _, s := range servers[1:] {
		if err := Cmd(ctx, servers[0].Addr, nil, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(s.Port), strconv.Itoa(s.BusPort)); err != nil {
			return fmt.Errorf("redisproc: CLUSTER MEET %s: %w", s.Addr, err)
		}
	}
	return WaitClusterOK(ctx, servers)
}

// SlotRange is the slots of shard i of n: an even split, the remainder to
// the last shard.
func SlotRange(i, n int) (lo, hi int) {
	per := Slots / n
	lo = i * per
	hi = lo + per - 1
	if i == n-1 {
		hi = Slots - 1
	}
	return lo, hi
}

// WaitClusterOK polls every running node until each reports
// cluster_state:ok, knows every node and sees every slot owned.
func WaitClusterOK(ctx context.Context, servers []*Server) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout*2)
	defer cancel()
	var last error
	for {
		last = clusterOK(ctx, servers)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: cluster not ok: %w (%v)", last, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func clusterOK(ctx context.Context, servers []*Server) error {
	for _, s := range servers {
		if !s.Running() {
			continue
		}
		var info string
		if err := Cmd(ctx, s.Addr, &info, "CLUSTER", "INFO"); err != nil {
			return err
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:" + strconv.Itoa(len(servers))} {
			if !strings.Contains(info, want+"\r\n") {
				return fmt.Errorf("%s: no %s yet", s.Addr, want)
			}
		}
	}
	return nil
}

// Cmd runs one command on a fresh connection to addr.
func Cmd(ctx context.Context, addr string, rcv any, cmd string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(ctx, radix.Cmd(rcv, cmd, args...))
}

// NodeID is the cluster node id of s (CLUSTER MYID).
func NodeID(ctx context.Context, s *Server) (string, error) {
	var id string
	err := Cmd(ctx, s.Addr, &id, "CLUSTER", "MYID")
	return id, err
}

// MigrateSlot moves slot from src to dst the way redis-cli --cluster
// reshard does: dst IMPORTING, src MIGRATING, then MIGRATE of the slot's
// keys batch keys at a time, then SETSLOT NODE on dst, src and every other
// node of all. between, if not nil, runs after each MIGRATE (while the slot
// is half moved) and may end the move early by returning an error.
func MigrateSlot(ctx context.Context, all []*Server, src, dst *Server, slot, batch int, between func() error) error {
	dstID, err := BeginMigration(ctx, src, dst, slot)
	if err != nil {
		return err
	}
	sl := strconv.Itoa(slot)
	for {
		var keys []string
		if err := Cmd(ctx, src.Addr, &keys, "CLUSTER", "GETKEYSINSLOT", sl, strconv.Itoa(batch)); err != nil {
			return fmt.Errorf("redisproc: GETKEYSINSLOT on %s: %w", src.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		args := append([]string{"127.0.0.1", strconv.Itoa(dst.Port), "", "0", "5000", "KEYS"}, keys...)
		if err := Cmd(ctx, src.Addr, nil, "MIGRATE", args...); err != nil {
			return fmt.Errorf("redisproc: MIGRATE from %s: %w", src.Addr, err)
		}
		if between != nil {
			if err := between(); err != nil {
				return err
			}
		}
	}
	// The target first, as redis-cli does: once the source lets go, the
	// target must already own the slot.
	for _, s := range append([]*Server{dst, src}, all...) {
		if !s.Running() {
			continue
		}
		if err := Cmd(ctx, s.Addr, nil, "CLUSTER", "SETSLOT", sl, "NODE", dstID); err != nil {
			return fmt.Errorf("redisproc: SETSLOT NODE on %s: %w", s.Addr, err)
		}
	}
	return nil
}

// BeginMigration takes the first two steps of moving slot from src to dst
// (dst IMPORTING, src MIGRATING) and returns dst's node id. Left there, the
// slot stays half moved, as after a reshard cut by a fault: keys src lacks
// are answered with ASK, and dst answers MOVED to a plain read of the keys
// it holds.
func BeginMigration(ctx context.Context, src, dst *Server, slot int) (dstID string, err error) {
	srcID, err := NodeID(ctx, src)
	if err != nil {
		return "", err
	}
	if dstID, err = NodeID(ctx, dst); err != nil {
		return "", err
	}
	sl := strconv.Itoa(slot)
	if err := Cmd(ctx, dst.Addr, nil, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID); err != nil {
		return "", fmt.Errorf("redisproc: SETSLOT IMPORTING on %s: %w", dst.Addr, err)
	}
	if err := Cmd(ctx, src.Addr, nil, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID); err != nil {
		return "", fmt.Errorf("redisproc: SETSLOT MIGRATING on %s: %w", src.Addr, err)
	}
	return dstID, nil
}

// DoAsking runs cmd on c as a client redirected by ASK reads a key: a node
// importing the key's slot (a reshard left half moved) answers MOVED to a
// plain command on a key it holds, so cmd goes again after ASKING, on the
// same connection. Other errors, ASK among them, are returned as they are.
func DoAsking(ctx context.Context, c radix.Conn, rcv any, cmd string, args ...string) error {
	err := c.Do(ctx, radix.Cmd(rcv, cmd, args...))
	var se resp3.SimpleError
	if !errors.As(err, &se) || !strings.HasPrefix(se.S, "MOVED ") {
		return err
	}
	if err := c.Do(ctx, radix.Cmd(nil, "ASKING")); err != nil {
		return err
	}
	return c.Do(ctx, radix.Cmd(rcv, cmd, args...))
}

// SlotOwner returns the index in servers of the node that owns slot,
// as servers[0] sees the slot map.
func SlotOwner(ctx context.Context, servers []*Server, slot int) (int, error) {
	for i, s := range servers {
		if !s.Running() {
			continue
		}
		var out string
		if err := Cmd(ctx, s.Addr, &out, "CLUSTER", "NODES"); err != nil {
			return -1, err
		}
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) < 8 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, r := range f[8:] {
				if strings.HasPrefix(r, "[") {
					continue // a slot being migrated or imported
				}
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				l, err1 := strconv.Atoi(lo)
				h, err2 := strconv.Atoi(hi)
				if err1 == nil && err2 == nil && slot >= l && slot <= h {
					return i, nil
				}
			}
		}
	}
	return -1, fmt.Errorf("redisproc: no node owns slot %d", slot)
}

// AddReplica starts one more cluster node, joins it to the cluster of
// servers and makes it a replica of servers[master], then waits until that
// master's CLUSTER SLOTS entry lists it. The caller stops it.
func AddReplica(ctx context.Context, servers []*Server, master int) (*Server, error) {
	bin, err := LookPath()
	if err != nil {
		return nil, err
	}
	s, err := newServer(bin)
	if err != nil {
		return nil, err
	}
	if s.BusPort, err = freePort(); err != nil {
		return nil, err
	}
	if err := s.startOnFreePort(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		s.Stop()
		return nil, err
	}
	if err := Cmd(ctx, servers[0].Addr, nil, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(s.Port), strconv.Itoa(s.BusPort)); err != nil {
		return fail(err)
	}
	id, err := NodeID(ctx, servers[master])
	if err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		// REPLICATE needs the master known to the new node first.
		err = Cmd(ctx, s.Addr, nil, "CLUSTER", "REPLICATE", id)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("redisproc: CLUSTER REPLICATE: %w", err))
		}
		time.Sleep(10 * time.Millisecond) // poll: gossip has no event to wait on
	}
	for {
		var out string
		if err := Cmd(ctx, servers[master].Addr, &out, "CLUSTER", "NODES"); err == nil && strings.Contains(out, "slave "+id) {
			return s, nil
		}
		if time.Now().After(deadline) {
			return fail(errors.New("redisproc: the replica never showed in CLUSTER NODES"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
