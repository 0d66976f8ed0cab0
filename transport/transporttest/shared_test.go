package transporttest_test

import (
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/memory"
)

// The read-write mutants: each breaks one rule of the Shared part of the
// contract, and the subtest named must catch it.
func init() {
	wantSkip["minimal"] = append(wantSkip["minimal"], "shared", "writer_waits", "shared_expiry", "shared_model")
	wantSkip["minimal with fencing"] = append(wantSkip["minimal with fencing"], "shared", "writer_waits", "shared_expiry", "shared_model")
	mutants = append(mutants, []struct {
		name     string
		wantFail string
		wrap     func(m *memory.Master, c transport.Transport) transport.Transport
	}{
		{"reader admitted under a writer", "shared", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			if _, writer := m.Get(op.Key); writer && op.Kind == transport.AcquireShared {
				return transport.Result{OK: true}
			}
			return one(c, op)
		})},
		{"writer admitted over live readers", "writer_waits", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			r := one(c, op)
			if _, writer := m.Get(op.Key); op.Kind == transport.AcquireExclusive && !r.OK && !writer {
				return transport.Result{OK: true} // refused by readers, and told it got in
			}
			return r
		})},
		{"expired reader blocks forever", "shared_expiry", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			if op.Kind == transport.AcquireShared || op.Kind == transport.ExtendShared {
				op.TTL = time.Hour
			}
			return one(c, op)
		})},
		{"writer leaves no marker", "writer_waits", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			r := one(c, op)
			if op.Kind == transport.AcquireExclusive && !r.OK {
				one(c, transport.Op{Kind: transport.ReleaseShared, Key: op.Key, Value: op.Value})
			}
			return r
		})},
		{"reader release drops the writer", "shared", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			if v, writer := m.Get(op.Key); writer && op.Kind == transport.ReleaseShared {
				op.Value = v
			}
			return one(c, op)
		})},
		{"reader extend revives", "shared", perOp(func(m *memory.Master, c transport.Transport, op transport.Op) transport.Result {
			if op.Kind == transport.ExtendShared && !one(c, op).OK {
				op.Kind = transport.AcquireShared
			}
			return one(c, op)
		})},
		{"minimal applies shared acquires as plain ones", "unsupported", func(m *memory.Master, c transport.Transport) transport.Transport {
			return minimal{c, 0, func(op *transport.Op) bool {
				if op.Kind == transport.AcquireShared || op.Kind == transport.AcquireExclusive {
					op.Kind = transport.Acquire
				}
				return !op.Kind.Shared()
			}}
		}},
		{"minimal declares shared", "shared", func(m *memory.Master, c transport.Transport) transport.Transport {
			return declared{minimal{c, 0, nil}, transport.Shared}
		}},
	}...)
}
