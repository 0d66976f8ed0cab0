package engine

import (
	"fmt"
	"strings"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// clusterConfig parses master i, a Redis Cluster address, into clusters[i]
// and returns the id it is known by for the duplicate check: its name.
func clusterConfig(i int, addr string, o api.Options, clusters []*rediscluster.Config, seen map[string]int) (string, error) {
	cfg, err := rediscluster.ParseAddr(addr)
	if err != nil {
		return "", fmt.Errorf("%w: master %d: %w", api.ErrInvalidArgument, i+1, err)
	}
	cfg.Node.OpTimeout = o.MasterTimeout
	for _, s := range cfg.Seeds {
		id := strings.ToLower(s)
		if j, dup := seen[id]; dup {
			return "", fmt.Errorf("%w: masters %d and %d both name %s: a master counted twice would vote twice; list each once", api.ErrInvalidArgument, j+1, i+1, id)
		}
		seen[id] = i
	}
	clusters[i] = &cfg
	return strings.ToLower(addr), nil
}

// keyChecker is an optional interface of a transport whose master refuses
// some keys, or sets of keys, that another master takes: a Redis Cluster
// runs a multi-key op only within one slot, and keeps a fencing counter in
// its key's slot. The engine asks before it sends anything, so the caller
// learns what to fix (a hash tag) rather than a lock that never gets a
// quorum.
type keyChecker interface {
	CheckKeys(keys []string, fenced bool) error
}

func (e *Engine) checkKeys(key string, keys []string, fenced bool) error {
	for _, kc := range e.checkers {
		if keys == nil {
			// Built only when some master asks: the common engine
			// has none, and a Lock costs it no allocation here.
			keys = []string{key}
		}
		if err := kc.c.CheckKeys(keys, fenced); err != nil {
			return fmt.Errorf("%w: master %s: %w", api.ErrInvalidArgument, e.names[kc.i], err)
		}
	}
	return nil
}

// keyCheckerOf is master i's keyChecker.
type keyCheckerOf struct {
	i int
	c keyChecker
}

// keyCheckers lists the transports of ts that are keyCheckers, found once
// at the start: asking each transport on every Lock was five assertions of
// an interface to another (an itab lookup each) a lock for nothing, on an
// engine of masters that check no key.
func keyCheckers(ts []transport.Transport) []keyCheckerOf {
	var out []keyCheckerOf
	for i, t := range ts {
		if kc, ok := t.(keyChecker); ok {
			out = append(out, keyCheckerOf{i, kc})
		}
	}
	return out
}
