// Package opkeys names the keys an op touches on a master. The Redis
// transports order the ops they send again within a batch (after NOSCRIPT,
// MOVED, ASK or TRYAGAIN) by these keys: two ops that share none commute.
package opkeys

import "github.com/quorumlock/redlock/transport"

// Of returns op's lock keys: Keys, or Key for a single-key op.
func Of(op *transport.Op) []string {
	if len(op.Keys) > 0 {
		return op.Keys
	}
	return []string{op.Key}
}

// Server returns the keys op reads or writes on the master; fence names a
// lock key's fencing counter as the master stores it. A write-back
// (RaiseFence) touches its counter alone and a fenced acquire its key and
// the counter. Ordering a write-back by its lock key, as both transports
// did, failed a release before it that met NOSCRIPT or a redirect ("not
// resent"), and an Unlock then left its key until the TTL (SAFETY.md,
// ask21 and keep22).
func Server(op *transport.Op, fence func(key string) string) []string {
	switch op.Kind {
	case transport.RaiseFence:
		return []string{fence(op.Key)}
	case transport.AcquireFenced:
		return []string{op.Key, fence(op.Key)}
	}
	return Of(op)
}
