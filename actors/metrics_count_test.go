package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// TestMetricsCountMatchesPerOpCounting checks the batch op counting behind
// redlock.master.ops (a leading run, then a tally for mixed batches)
// against the plain definition, one (kind, result) per op: uniform, mixed,
// failed, quarantined and out-of-range kinds, and whether the master
// counts as having answered.
func TestMetricsCountMatchesPerOpCounting(t *testing.T) {
	quarantined := fmt.Errorf("master 2: %w", api.ErrQuarantined)
	failed := errors.New("connection reset")
	results := []transport.Result{{OK: true}, {}, {Err: failed}, {Err: quarantined}}
	rng := rand.New(rand.NewPCG(1, 2))
	batches := [][]int{ // op i: kind*len(results)+result, fixed cases first
		{}, {0}, {1}, {2}, {3}, {0, 0, 0}, {2, 2}, {3, 3, 1}, {0, 0, 1, 0}, {9, 9, 9, 4, 9},
		{int(numKinds+3)*4 + 0, 3*4 + 0}, // a kind past numKinds counts as kind%numKinds
	}
	for range 300 {
		b := make([]int, 1+rng.IntN(40))
		kinds, res := 1+rng.IntN(4), 1+rng.IntN(len(results))
		for i := range b {
			b[i] = rng.IntN(kinds)*4 + rng.IntN(res)
		}
		batches = append(batches, b)
	}
	for _, b := range batches {
		var nm nodeMetrics
		var want [numKinds][numResults]int64
		ops := make([]transport.Op, len(b))
		res := make([]transport.Result, len(b))
		wantAnswered := false
		for i, v := range b {
			ops[i].Kind = transport.OpKind(v / 4)
			res[i] = results[v%4]
			r := []int{resultOK, resultRefused, resultFailed, resultQuarantined}[v%4]
			want[(v/4)%numKinds][r]++
			wantAnswered = wantAnswered || r != resultFailed
		}
		if got := nm.count(ops, res); got != wantAnswered {
			t.Errorf("batch %v: answered = %v, want %v", b, got, wantAnswered)
		}
		for k := range want {
			for r := range want[k] {
				if got := nm.ops[k][r].Load(); got != want[k][r] {
					t.Errorf("batch %v: kind %d result %s counted %d, want %d", b, k, resultNames[r], got, want[k][r])
				}
			}
		}
	}
}
