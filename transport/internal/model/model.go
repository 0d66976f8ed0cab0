// Package model is the sequential reference of the transport contract that
// the conformance suite (transport/transporttest) and the memory master's
// fuzz test both check masters against: one copy, so that the two cannot
// come to disagree about what a master must answer.
package model

import (
	"errors"
	"fmt"

	"github.com/quorumlock/redlock/transport"
)

// Model is one master whose keys never expire within a test and whose
// fencing counters start at 0. Ops applied to it in order give the answers
// the contract requires of a master that received them in that order.
type Model struct {
	Held  map[string]string // key -> value held (a writer or a mutex)
	Fence map[string]Fence  // key -> fencing counter
	// Readers and Waiting are the read-write side, at the lock key itself:
	// key -> its live readers, and key -> the values of the writers
	// waiting on it (AcquireExclusive's markers). A key has readers or
	// markers, or a value in Held, never both.
	Readers map[string]map[string]bool
	Waiting map[string]map[string]bool
}

// Fence is one key's fencing counter and its owner, the value of the lock
// that last set it.
type Fence struct {
	N     int64
	Owner string
}

// New returns an empty master, as after a restart without persistence.
func New() Model {
	return Model{Held: map[string]string{}, Fence: map[string]Fence{},
		Readers: map[string]map[string]bool{}, Waiting: map[string]map[string]bool{}}
}

// exists says whether key exists on the master for the plain ops: held by
// a value, or holding readers or a writer's marker.
func (m Model) exists(key string) bool {
	_, held := m.Held[key]
	return held || len(m.Readers[key]) > 0 || len(m.Waiting[key]) > 0
}

func add(set map[string]map[string]bool, key, value string) {
	if set[key] == nil {
		set[key] = map[string]bool{}
	}
	set[key][value] = true
}

// drop removes value from key's set and reports whether it was there.
func drop(set map[string]map[string]bool, key, value string) bool {
	if !set[key][value] {
		return false
	}
	delete(set[key], value)
	if len(set[key]) == 0 {
		delete(set, key)
	}
	return true
}

// applyShared applies a valid read-write op.
func (m Model) applyShared(op transport.Op) bool {
	k, v := op.Key, op.Value
	w, held := m.Held[k]
	switch op.Kind {
	case transport.AcquireShared:
		if held || len(m.Waiting[k]) > 0 {
			return false
		}
		add(m.Readers, k, v)
		return true
	case transport.AcquireExclusive:
		if held {
			return false
		}
		if len(m.Readers[k]) > 0 {
			add(m.Waiting, k, v)
			return false
		}
		delete(m.Waiting, k)
		m.Held[k] = v
		return true
	case transport.ReleaseShared:
		if held && w == v {
			delete(m.Held, k)
			return true
		}
		drop(m.Waiting, k, v)
		return drop(m.Readers, k, v)
	case transport.ExtendShared:
		return held && w == v || m.Readers[k][v]
	}
	return false
}

// Check applies op to m and says how r differs from the answer the contract
// requires, if it does. An invalid op (transport.Check) must be answered
// with ErrInvalidOp and changes nothing.
func (m Model) Check(op transport.Op, r transport.Result) error {
	if err := transport.Check(&op); err != nil {
		if !errors.Is(r.Err, transport.ErrInvalidOp) {
			return fmt.Errorf("invalid op (%v) answered %+v, want ErrInvalidOp", err, r)
		}
		return nil
	}
	ok, token := m.Apply(op)
	if r.Err != nil || r.OK != ok || (op.Kind == transport.AcquireFenced && r.Token != token) {
		return fmt.Errorf("answered OK=%v Token=%d Err=%v, want OK=%v Token=%d Err=nil", r.OK, r.Token, r.Err, ok, token)
	}
	return nil
}

// Apply applies a valid op and returns the OK and Token the master must
// answer.
func (m Model) Apply(op transport.Op) (bool, int64) {
	if len(op.Keys) > 1 {
		return m.applyMulti(op), 0
	}
	if op.Kind.Shared() {
		return m.applyShared(op), 0
	}
	v, held := m.Held[op.Key]
	switch op.Kind {
	case transport.Acquire:
		if m.exists(op.Key) {
			return false, 0
		}
		m.Held[op.Key] = op.Value
		return true, 0
	case transport.Release:
		if held && v == op.Value {
			delete(m.Held, op.Key)
			return true, 0
		}
		return false, 0
	case transport.Extend:
		return held && v == op.Value, 0
	case transport.AcquireFenced:
		if m.exists(op.Key) {
			return false, 0
		}
		m.Held[op.Key] = op.Value
		n := m.Fence[op.Key].N + 1
		m.Fence[op.Key] = Fence{n, op.Value}
		return true, n
	case transport.RaiseFence:
		f := m.Fence[op.Key]
		if f.N < op.Token {
			m.Fence[op.Key] = Fence{op.Token, op.Value}
			return true, 0
		}
		return f.N == op.Token && f.Owner == op.Value, 0
	}
	return false, 0
}

func (m Model) applyMulti(op transport.Op) bool {
	switch op.Kind {
	case transport.Acquire:
		for _, k := range op.Keys {
			if m.exists(k) {
				return false
			}
		}
		for _, k := range op.Keys {
			m.Held[k] = op.Value
		}
		return true
	case transport.Release:
		deleted := 0
		for _, k := range op.Keys {
			if v, held := m.Held[k]; held && v == op.Value {
				delete(m.Held, k)
				deleted++
			}
		}
		return deleted == len(op.Keys)
	case transport.Extend:
		for _, k := range op.Keys {
			if v, held := m.Held[k]; !held || v != op.Value {
				return false
			}
		}
		return true
	}
	return false
}
