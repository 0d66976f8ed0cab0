package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport/rediscluster"
)

// halfMigrate leaves slot half moved from src to dst, as a reshard cut by
// a fault does (MigrateSlot's first two steps, then nothing): IMPORTING on
// dst, MIGRATING on src, every key still on src.
func halfMigrate(t *testing.T, c []*redistest.Server, src, dst, slot int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps := procs(c)
	srcID, err := redisproc.NodeID(ctx, ps[src])
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := redisproc.NodeID(ctx, ps[dst])
	if err != nil {
		t.Fatal(err)
	}
	sl := strconv.Itoa(slot)
	if err := redisproc.Cmd(ctx, ps[dst].Addr, nil, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID); err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Cmd(ctx, ps[src].Addr, nil, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID); err != nil {
		t.Fatal(err)
	}
}

// askingGet reads key on addr as a client redirected there by ASK does
// (ASKING, then GET on the same connection): a node importing key's slot
// answers a plain GET with MOVED; the owner of a migrating slot answers
// ASK for a key it does not have. ok is false when the key is not there.
func askingGet(t *testing.T, addr, key string) (val string, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := radix.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var v radix.Maybe
	v.Rcv = &val
	err = c.Do(ctx, radix.Cmd(&v, "GET", key))
	var se resp3.SimpleError
	if errors.As(err, &se) && strings.HasPrefix(se.S, "ASK ") {
		return "", false // the slot's owner, while it migrates: the key is not here
	}
	if errors.As(err, &se) && strings.HasPrefix(se.S, "MOVED ") {
		if err = c.Do(ctx, radix.Cmd(nil, "ASKING")); err == nil {
			err = c.Do(ctx, radix.Cmd(&v, "GET", key))
		}
	}
	if err != nil {
		t.Fatalf("GET %s on %s: %v", key, addr, err)
	}
	return val, !v.Null
}

// tryAgainCount reads how many TRYAGAIN errors s has answered.
func tryAgainCount(t *testing.T, s *redistest.Server) int {
	t.Helper()
	var info string
	s.Do(t, &info, "INFO", "errorstats")
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_TRYAGAIN:count="); ok {
			n := 0
			for _, d := range rest {
				if d < '0' || d > '9' {
					break
				}
				n = n*10 + int(d-'0')
			}
			return n
		}
	}
	return 0
}

// TestUnlockOnImportingNodeLeavesNoKey (ask21): a cluster whose lock key's
// slot is left half moved (a reshard cut by a fault: MIGRATING on the
// owner, IMPORTING on the target, no key moved; the fencing counter stays
// on the owner). An unfenced lock's SET reaches the target over ASK. A
// fenced contender of the same engine gets TRYAGAIN on that cluster for
// as long as the slot stays so (its counter is on the owner), wins on the
// other masters, and writes its token back to every master. Its ops on the
// cluster wait behind its stalled fenced acquire with the holder's Unlock,
// and all go in one batch: the holder's release (ASK from the owner), the
// contender's fenced acquire (TRYAGAIN) and its write-back (run by the
// owner, where the counter is). The holder's Unlock must still delete its
// key on the importing node.
func TestUnlockOnImportingNodeLeavesNoKey(t *testing.T) {
	c := redistest.StartCluster(t, 2)
	plain := redistest.Start(t, 2)
	const key = "torture:12"
	slot := rediscluster.Slot(key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := redisproc.SlotOwner(ctx, procs(c), slot)
	if err != nil {
		t.Fatal(err)
	}
	dst := 1 - src
	addrs := []string{clusterAddr(c), plain[0].Addr, plain[1].Addr}
	e, err := engine.New(addrs, api.WithoutRestartQuarantine(), api.WithTTL(20*time.Second), api.WithMasterTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	// The fencing counter lands on the owner before the slot starts to move.
	l, err := e.Lock(ctx, key, api.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	halfMigrate(t, c, src, dst, slot)

	a, err := e.Lock(ctx, key, api.WithFencing(false))
	if err != nil {
		t.Fatalf("unfenced lock over ASK: %v", err)
	}
	if v, ok := askingGet(t, c[dst].Addr, key); !ok || v != a.Value() {
		t.Fatalf("the holder's key on the importing node: %q %v, want %q", v, ok, a.Value())
	}

	before := tryAgainCount(t, c[src])
	type got struct {
		l   api.Lock
		err error
	}
	bc := make(chan got, 1)
	go func() {
		l, err := e.Lock(ctx, key, api.WithFencing(true))
		bc <- got{l, err}
	}()
	// The contender's first fenced acquire is stalled on the cluster
	// (TRYAGAIN, retried for up to 200ms); the other masters refused it.
	for tryAgainCount(t, c[src])+tryAgainCount(t, c[dst]) == before {
		time.Sleep(time.Millisecond) // poll: another process's counter
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("holder's Unlock: %v", err)
	}
	b := <-bc
	if b.err != nil {
		t.Fatalf("fenced contender: %v", b.err)
	}
	if v, ok := askingGet(t, c[dst].Addr, key); ok && v == a.Value() {
		t.Fatalf("after the holder's Unlock returned nil, its key is still on the importing node %s (value %q): its release was not applied", c[dst].Addr, v)
	}
	if err := b.l.Unlock(ctx); err != nil {
		t.Logf("contender's Unlock: %v", err)
	}
	e.Close()
	for i, s := range c {
		if v, ok := askingGet(t, s.Addr, key); ok {
			t.Errorf("key left on cluster node %d (%s) after Unlock and Close: %q", i, s.Addr, v)
		}
	}
	for i, s := range plain {
		if v, ok := s.Get(t, key); ok {
			t.Errorf("key left on master %d: %q", i+2, v)
		}
	}
}
