package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mediocregopher/radix/v4"
)

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// clusterArgs are a cluster node's extra flags: its nodes.conf lives in the
// server's directory, so a restarted node (empty: no persistence) comes back
// as the same node id owning the same slots, the "shard restarts empty"
// fault. Full coverage is not required, so the other shards keep serving
// while one is down.
func (s *Server) clusterArgs() []string {
	if s.BusPort == 0 {
		return nil
	}
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes-" + strconv.Itoa(s.Port) + ".conf",
		"--cluster-port", strconv.Itoa(s.BusPort),
		"--cluster-node-timeout", "5000",
		"--cluster-require-full-coverage", "no",
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
