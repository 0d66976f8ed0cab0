package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/transport"
	"github.com/quorumlock/redlock/transport/internal/model"
	"github.com/quorumlock/redlock/transport/memory"
)

// FuzzOps runs arbitrary sequences of operations, in arbitrary batches, with
// restarts in between, on a memory master and on a plain model of the
// contract, and requires the same answers and the same final state. Run with
// go test -fuzz=FuzzOps ./transport/memory/ ; without -fuzz the seeds run as
// a normal test.
//
// Each op takes three bytes: kind, keys and value, ttl or token. Keys live
// for an hour, so nothing expires during a run (expiry has tests of its
// own). Invalid ops (ttl 0 or not whole milliseconds, token 0, unknown kind)
// must fail with ErrInvalidOp and change nothing.
func FuzzOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 0, 4, 1, 1, 0, 1, 1, 4, 1})                                        // acquire a, refused b, release a, release b
	f.Add([]byte{3, 0, 1, 3, 0, 1, 1, 0, 1, 3, 4, 1, 4, 0, 9, 4, 0, 2})                      // fenced acquires, raises
	f.Add([]byte{5, 0x30, 1, 5, 0x60, 1, 7, 0x30, 1, 6, 0x30, 0x81, 6, 0x30, 1})             // multi-key ops, a duplicate key
	f.Add([]byte{0, 0, 0, 2, 0, 1, 0, 0, 1, 8, 0, 0, 0, 0, 1, 2, 0, 1, 8, 0x80, 0, 1, 0, 1}) // invalid ttl, batches, a restart
	f.Add([]byte{9, 0, 1, 0, 1, 2, 4, 3, 0, 2, 2, 1, 7, 0xf0, 1, 8, 0x80, 0, 3, 1, 1})
	// readers a, a writer waiting, a plain acquire, extends, releases
	f.Add([]byte{0xc0, 0, 2, 0xc0, 4, 2, 0xc3, 8, 2, 0xc0, 0x0c, 2, 0, 0x0c, 2, 0xc2, 0, 2, 0xc1, 0, 0, 0xc1, 4, 0, 0xc3, 8, 2, 0xc0, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := memory.NewNamed("fuzz")
		c := m.Transport()
		defer c.Close()
		ep := c.(transport.ServerReporter)
		ir := ep
		md := model.New()
		var batch []transport.Op
		flush := func() {
			if len(batch) == 0 {
				return
			}
			res := make([]transport.Result, len(batch))
			if err := c.Do(context.Background(), batch, res); err != nil {
				t.Fatalf("Do: %v", err)
			}
			for i, op := range batch {
				if err := md.Check(op, res[i]); err != nil {
					t.Fatalf("op %d of the batch, %s: %v", i, describe(op), err)
				}
			}
			batch = batch[:0]
		}
		for n := 0; len(data) >= 3 && n < 300; n++ {
			b0, b1, b2 := data[0], data[1], data[2]
			data = data[3:]
			if b0%10 == 8 {
				flush()
				if b1&0x80 != 0 {
					before, run := ep.Epoch(), runID(t, ir)
					m.Restart()
					md = model.New()
					if ep.Epoch() == before || runID(t, ir) == run {
						t.Fatal("a restart changed neither the epoch nor the run id")
					}
				}
				continue
			}
			batch = append(batch, decode(b0, b1, b2))
		}
		flush()
		live := 0
		for _, k := range keys {
			v, ok := m.Get(k)
			if want, held := md.Held[k]; ok != held || v != want {
				t.Fatalf("key %s: master holds %q (%v), model %q (%v)", k, v, ok, want, held)
			}
			if ok {
				live++
			}
			if n := m.Readers(k); n != len(md.Readers[k]) {
				t.Fatalf("key %s: master has %d readers, model %d", k, n, len(md.Readers[k]))
			}
			if len(md.Readers[k]) > 0 || len(md.Waiting[k]) > 0 {
				live++
			}
			if n, o := m.Fence(k), m.FenceOwner(k); n != md.Fence[k].N || o != md.Fence[k].Owner {
				t.Fatalf("fence of %s: master %d owned by %q, model %d owned by %q", k, n, o, md.Fence[k].N, md.Fence[k].Owner)
			}
		}
		if m.Len() != live {
			t.Fatalf("Len %d, want %d", m.Len(), live)
		}
	})
}

var (
	keys   = []string{"a", "b", "c", "d"}
	values = []string{"v1", "v2", "v3"}
)

const hold = time.Hour

// decode builds one op from three bytes.
func decode(b0, b1, b2 byte) transport.Op {
	key, value := keys[b1&3], values[int(b1>>2&3)%len(values)]
	ttl := hold
	switch b2 & 0x7f {
	case 0:
		ttl = 0 // invalid: below 1ms
	case 1:
		ttl = 1500 * time.Microsecond // invalid: not whole milliseconds
	}
	op := transport.Op{Key: key, Value: value, TTL: ttl}
	if b0 >= 0xc0 {
		// The read-write ops (a range the older seeds do not use).
		op.Kind = [...]transport.OpKind{transport.AcquireShared, transport.ReleaseShared,
			transport.ExtendShared, transport.AcquireExclusive}[b0%4]
		if op.Kind == transport.ReleaseShared {
			op.TTL = 0
		}
		return op
	}
	switch b0 % 10 {
	case 0:
		op.Kind = transport.Acquire
	case 1:
		op.Kind, op.TTL = transport.Release, 0
	case 2:
		op.Kind = transport.Extend
	case 3:
		op.Kind = transport.AcquireFenced
	case 4:
		op.Kind, op.TTL, op.Token = transport.RaiseFence, 0, int64(b2%7) // 0: invalid
		if b2&0x80 != 0 {
			op.Value = "" // invalid
		}
	case 5, 6, 7:
		op.Kind = [...]transport.OpKind{transport.Acquire, transport.Release, transport.Extend}[b0%10-5]
		if op.Kind == transport.Release {
			op.TTL = 0
		}
		for i, k := range keys {
			if b1>>4&(1<<i) != 0 {
				op.Keys = append(op.Keys, k)
			}
		}
		if b2&0x80 != 0 && len(op.Keys) > 0 {
			op.Keys = append(op.Keys, op.Keys[0]) // a key listed twice
		}
		if len(op.Keys) > 0 {
			op.Key = op.Keys[0]
		}
	default:
		op.Kind = transport.OpKind(200 + b0%10) // unknown
	}
	return op
}

func runID(t *testing.T, ir transport.ServerReporter) string {
	t.Helper()
	info, err := ir.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.RunID
}

func describe(op transport.Op) string {
	return fmt.Sprintf("%s key=%q keys=%q value=%q ttl=%v token=%d", op.Kind, op.Key, op.Keys, op.Value, op.TTL, op.Token)
}
