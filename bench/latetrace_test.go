package bench_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/iotrace"
)

// lateTrace collects, through the transport's iotrace hook, every batch
// that failed because its master timeout ran out, and says where its time
// went: how long after the timer was armed its bytes went out, and whether
// its reply had reached the client (socket or reader buffer) when the timer
// fired, or when the reader read it at last.
type lateTrace struct {
	timeout time.Duration
	mu      sync.Mutex
	all     []*iotrace.Late
}

func traceLate(t *testing.T, timeout time.Duration) *lateTrace {
	lt := &lateTrace{timeout: timeout}
	h := func(l *iotrace.Late) {
		lt.mu.Lock()
		lt.all = append(lt.all, l)
		lt.mu.Unlock()
	}
	iotrace.Hook.Store(&h)
	t.Cleanup(func() { iotrace.Hook.Store(nil) })
	return lt
}

// summary describes the failed batches; call it when no batch is in flight.
func (lt *lateTrace) summary() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if len(lt.all) == 0 {
		return "no batch failed by its deadline"
	}
	stages := map[iotrace.Stage]int{}
	var toWrite, toRead, afterDeadline []time.Duration
	var inSocket, inBuffer, arrivedBefore, never int
	for _, l := range lt.all {
		stages[l.Stage]++
		if l.Stage != iotrace.AwaitingReply {
			continue
		}
		armed := l.Deadline.Add(-lt.timeout)
		toWrite = append(toWrite, l.Written.Sub(armed))
		if l.InSocket {
			inSocket++
		}
		if l.InBuffer {
			inBuffer++
		}
		if l.InSocket || l.InBuffer {
			arrivedBefore++
		}
		if r := l.Read.Load(); r != 0 {
			read := time.Unix(0, r)
			toRead = append(toRead, read.Sub(l.Written))
			afterDeadline = append(afterDeadline, read.Sub(l.Deadline))
		} else {
			never++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d batches failed by their deadline:", len(lt.all))
	for _, s := range []iotrace.Stage{iotrace.BeforeWrite, iotrace.WaitingToWrite, iotrace.Write, iotrace.AwaitingReply} {
		fmt.Fprintf(&b, " %s %d;", s, stages[s])
	}
	if n := stages[iotrace.AwaitingReply]; n > 0 {
		fmt.Fprintf(&b, "\n  awaiting reply (%d): bytes in the socket at the deadline %d, in the reader's buffer %d (either: %d), never read %d",
			n, inSocket, inBuffer, arrivedBefore, never)
		fmt.Fprintf(&b, "\n  armed to written: %s", quantiles(toWrite))
		fmt.Fprintf(&b, "\n  written to read: %s", quantiles(toRead))
		fmt.Fprintf(&b, "\n  deadline to read: %s", quantiles(afterDeadline))
	}
	return b.String()
}

func quantiles(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	q := func(f float64) time.Duration { return d[int(f*float64(len(d)-1))].Round(time.Microsecond) }
	return fmt.Sprintf("min %v p50 %v p90 %v p99 %v max %v", d[0], q(0.5), q(0.9), q(0.99), d[len(d)-1])
}
