package redis

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mediocregopher/radix/v4"
	"github.com/mediocregopher/radix/v4/resp"
	"github.com/mediocregopher/radix/v4/resp/resp3"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/transport"
)

// encodeAll runs addAll over ops and returns the batch.
func encodeAll(t *testing.T, ops []transport.Op, maxK int) *batch {
	t.Helper()
	res := make([]transport.Result, len(ops))
	for i := range ops {
		if err := transport.Check(&ops[i]); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	b := getBatch(len(ops))
	b.addAll(ops, res, maxK)
	return b
}

// relBatch is the command of a group releasing keys k with values v.
func relBatch(kv ...string) []string {
	n := len(kv) / 2
	args := []string{"EVALSHA", scripts[scriptReleaseBatch].sha, strconv.Itoa(n)}
	for i := 0; i < n; i++ {
		args = append(args, kv[2*i])
	}
	for i := 0; i < n; i++ {
		args = append(args, kv[2*i+1])
	}
	return args
}

// TestCoalesceEncoding: releases are coalesced into groups that close
// before an op of one of their keys, before a second release of a key they
// hold, before any fenced, multi-key or read-write op, and at the cap; a
// group of one is the plain release; and each reply says which ops it
// answers, in op order within a group.
func TestCoalesceEncoding(t *testing.T) {
	sec := time.Second
	keys := []string{"m1", "m2"}
	cases := []struct {
		name string
		maxK int
		ops  []transport.Op
		cmds [][]string
		// answers[j]: the ops reply j answers.
		answers [][]int
	}{
		{
			name: "interleaved with other keys' acquires",
			maxK: 48,
			ops:  []transport.Op{rel("a", "1"), acq("x", "v", sec), rel("b", "2"), ext("y", "v", sec), rel("c", "3")},
			cmds: [][]string{
				{"SET", "x", "v", "NX", "PX", "1000"},
				relBatch("a", "1", "b", "2", "c", "3"),
				{"EVALSHA", extendSHA, "1", "y", "v", "1000"},
			},
			answers: [][]int{{1}, {0, 2, 4}, {3}},
		},
		{
			name: "extends: a group of each kind, closed by an op of one of its keys",
			maxK: 48,
			ops: []transport.Op{
				ext("a", "1", sec), ext("b", "2", 2*sec), rel("c", "3"),
				ext("c", "3", 3*sec), // closes the release group: c is in it
				acq("a", "1", sec),   // closes the extend group: a is in it
				rel("d", "4"), ext("e", "5", sec),
			},
			cmds: [][]string{
				{"EVALSHA", releaseSHA, "1", "c", "3"},
				{"EVALSHA", scripts[scriptExtendBatch].sha, "3", "a", "b", "c", "1", "2", "3", "1000", "2000", "3000"},
				{"SET", "a", "1", "NX", "PX", "1000"},
				{"EVALSHA", releaseSHA, "1", "d", "4"},
				{"EVALSHA", extendSHA, "1", "e", "5", "1000"},
			},
			answers: [][]int{{2}, {0, 1, 3}, {4}, {5}, {6}},
		},
		{
			name: "an acquire of a group's key closes it first",
			maxK: 48,
			ops:  []transport.Op{rel("a", "1"), rel("b", "2"), acq("a", "1", sec), rel("c", "3"), ext("c", "3", sec)},
			cmds: [][]string{
				relBatch("a", "1", "b", "2"),
				{"SET", "a", "1", "NX", "PX", "1000"},
				{"EVALSHA", releaseSHA, "1", "c", "3"},
				{"EVALSHA", extendSHA, "1", "c", "3", "1000"},
			},
			answers: [][]int{{0, 1}, {2}, {3}, {4}},
		},
		{
			name: "a second release of a key closes the group",
			maxK: 48,
			ops:  []transport.Op{rel("a", "1"), rel("b", "2"), rel("a", "9"), rel("d", "4")},
			cmds: [][]string{
				relBatch("a", "1", "b", "2"),
				relBatch("a", "9", "d", "4"),
			},
			answers: [][]int{{0, 1}, {2, 3}},
		},
		{
			name: "fenced and multi-key ops close the group, and a multi-key release is not coalesced",
			maxK: 48,
			ops: []transport.Op{
				rel("a", "1"), rel("b", "2"),
				{Kind: transport.AcquireFenced, Key: "z", Value: "v", TTL: sec},
				rel("c", "3"), rel("d", "4"),
				{Kind: transport.Release, Key: keys[0], Keys: keys, Value: "v"},
				rel("e", "5"),
				{Kind: transport.Release, Key: "s", Keys: []string{"s"}, Value: "6"}, // one key in Keys: plain
			},
			cmds: [][]string{
				relBatch("a", "1", "b", "2"),
				{"EVALSHA", scripts[scriptAcquireFenced].sha, "2", "z", transport.FenceKey("z"), "v", "1000"},
				relBatch("c", "3", "d", "4"),
				append(append([]string{"EVALSHA", scripts[scriptReleaseMulti].sha, "2"}, keys...), "v"),
				relBatch("e", "5", "s", "6"),
			},
			answers: [][]int{{0, 1}, {2}, {3, 4}, {5}, {6, 7}},
		},
		{
			name: "the cap",
			maxK: 2,
			ops:  []transport.Op{rel("a", "1"), rel("b", "2"), rel("c", "3"), rel("d", "4"), rel("e", "5")},
			cmds: [][]string{
				relBatch("a", "1", "b", "2"),
				relBatch("c", "3", "d", "4"),
				{"EVALSHA", releaseSHA, "1", "e", "5"},
			},
			answers: [][]int{{0, 1}, {2, 3}, {4}},
		},
		{
			name: "off",
			maxK: 1,
			ops:  []transport.Op{rel("a", "1"), rel("b", "2")},
			cmds: [][]string{
				{"EVALSHA", releaseSHA, "1", "a", "1"},
				{"EVALSHA", releaseSHA, "1", "b", "2"},
			},
			answers: [][]int{{0}, {1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := encodeAll(t, c.ops, c.maxK)
			var want bytes.Buffer
			for _, args := range c.cmds {
				if err := resp3.Marshal(&want, radix.Cmd(nil, args[0], args[1:]...), resp.NewOpts()); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(b.buf, want.Bytes()) {
				t.Errorf("encoded\n%q\nwant\n%q", b.buf, want.Bytes())
			}
			var got [][]int
			for j := range b.replies {
				got = append(got, slices.Clone(b.groupOps(j)))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.answers) {
				t.Errorf("replies answer %v, want %v", got, c.answers)
			}
		})
	}
}

// TestCoalesceOffOnCluster: a cluster node's batch (ClusterFenceKeys) and
// an ASKING batch send each release alone: a script's keys must share a
// slot there.
func TestCoalesceOffOnCluster(t *testing.T) {
	ops := []transport.Op{rel("a", "1"), rel("b", "2")}
	for _, name := range []string{"cluster", "asking"} {
		b := getBatch(2)
		b.clusterFence, b.asking = name == "cluster", name == "asking"
		b.addAll(ops, make([]transport.Result, 2), DefaultCoalesce)
		if bytes.Contains(b.buf, []byte(scripts[scriptReleaseBatch].sha)) {
			t.Errorf("%s: releases coalesced: %q", name, b.buf)
		}
	}
}

// TestCoalescedReleasesAnswerAsAlone: one batch of releases and extends of
// every case (held, held by another value, missing, a key of another type,
// a second op of a key, ops between acquires of other keys) answers, and
// leaves the master (keys and their ttls), exactly as the same batch sent
// one op per script (Coalesce 1).
func TestCoalescedReleasesAnswerAsAlone(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	run := func(maxK int) ([]transport.Result, string) {
		tr := dial(t, Config{Addr: s.Addr, Coalesce: maxK})
		s.Do(t, nil, "FLUSHALL")
		var setup, ops []transport.Op
		for i := range 60 {
			k := "k" + strconv.Itoa(i)
			setup = append(setup, acq(k, "v", time.Minute))
			switch i % 7 {
			case 0:
				ops = append(ops, rel(k, "v")) // held
			case 1:
				ops = append(ops, rel(k, "other")) // not ours
			case 2:
				ops = append(ops, rel("missing"+k, "v"))
			case 3:
				ops = append(ops, acq("new"+k, "v", time.Minute), rel(k, "v"), ext(k, "v", time.Minute))
			case 4:
				ops = append(ops, rel(k, "v"), rel(k, "v"), ext("k0", "v", time.Minute))
			case 5:
				ops = append(ops, ext(k, "v", time.Hour+time.Duration(i)*time.Minute), ext("missing"+k, "v", time.Hour))
			case 6:
				ops = append(ops, ext(k, "other", time.Hour), acq("new"+k, "v", time.Minute), ext(k, "v", 2*time.Hour), rel(k, "v"))
			}
		}
		mustDo(t, tr, setup, slices.Repeat([]bool{true}, len(setup))...)
		s.Do(t, nil, "RPUSH", "list", "x")
		ops = append(ops, rel("list", "x"), ext("list", "x", time.Hour), rel("k1", "v"))
		res, err := do(tr, ops...)
		if err != nil {
			t.Fatalf("Coalesce %d: %v", maxK, err)
		}
		// A key of another type inside a group of others, so that the
		// batch scripts meet it (above, each of its ops closes the
		// group the other opened, and so goes alone): a release group
		// [k1 list missing], an extend group [k8 list missing].
		more := []transport.Op{rel("k1", "v"), rel("list", "x"), rel("missing", "v"),
			ext("k8", "v", 3*time.Hour), ext("list", "x", time.Hour), ext("missing", "v", time.Hour)}
		if maxK > 1 {
			b := getBatch(len(more))
			b.addAll(more, make([]transport.Result, len(more)), maxK)
			if n := bytes.Count(b.buf, []byte(scripts[scriptReleaseBatch].sha)) + bytes.Count(b.buf, []byte(scripts[scriptExtendBatch].sha)); n != 2 {
				t.Fatalf("%d batch scripts for %v: the test does not set up the groups it means to", n, more)
			}
		}
		res2, err := do(tr, more...)
		if err != nil {
			t.Fatalf("Coalesce %d: %v", maxK, err)
		}
		res = append(res, res2...)
		var keys []string
		s.Do(t, &keys, "KEYS", "*")
		slices.Sort(keys)
		for i, k := range keys {
			// The ttl in minutes (the two runs are moments apart).
			keys[i] = fmt.Sprintf("%s:%d", k, (s.PTTL(t, k)+30_000)/60_000)
		}
		return res, strings.Join(keys, " ")
	}
	alone, keysAlone := run(1)
	together, keysTogether := run(DefaultCoalesce)
	for i := range alone {
		if alone[i] != together[i] {
			t.Errorf("op %d: %+v coalesced, %+v alone", i, together[i], alone[i])
		}
		if alone[i].Err != nil {
			t.Errorf("op %d: %v", i, alone[i].Err)
		}
	}
	if keysAlone != keysTogether {
		t.Errorf("keys left: coalesced\n%s\nalone\n%s", keysTogether, keysAlone)
	}
	if n := strings.Count(keysAlone, " ") + 1; n < 30 {
		t.Errorf("only %d keys left; the case mix should leave more", n)
	}
}

// TestCoalescedOrder: in one batch, acquire, release and extend of the same
// key keep slice order around groups of other keys' releases and extends.
func TestCoalescedOrder(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("k", "v1", time.Minute), acq("o1", "v", time.Minute), acq("o2", "v", time.Minute),
		acq("o3", "v", time.Minute), acq("o4", "v", time.Minute)}, true, true, true, true, true)
	ops := []transport.Op{
		rel("o1", "v"),              // group
		rel("k", "v1"),              // group: deletes k
		acq("k", "v2", time.Minute), // must run after the release: OK
		rel("o2", "v"),
		ext("k", "v2", 2*time.Minute), // must run after the acquire: OK
		rel("k", "v2"),                // deletes k again
		acq("k", "v3", time.Minute),   // OK
		rel("k", "v2"),                // not held: v3 is
		ext("o3", "v", time.Minute),   // extend group
		ext("n", "v", time.Minute),    // extend group: n does not exist yet
		acq("n", "v", time.Minute),    // must run after the extend: OK
		ext("o4", "v", time.Minute),
	}
	res, err := do(tr, ops...)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, true, true, true, true, true, false, true, false, true, true} {
		if res[i].Err != nil || res[i].OK != want {
			t.Errorf("op %d (%s %s %s): %+v, want OK=%v", i, ops[i].Kind, ops[i].Key, ops[i].Value, res[i], want)
		}
	}
	if v, ok := s.Get(t, "k"); !ok || v != "v3" {
		t.Errorf("k = %q, %v; want v3", v, ok)
	}
	for _, k := range []string{"o1", "o2"} {
		if _, ok := s.Get(t, k); ok {
			t.Errorf("%s left after its release", k)
		}
	}
}

// TestCoalescedNoScript: after SCRIPT FLUSH a group's releases are resent
// one by one, unless a later op of the batch on the same key ran (then
// they fail, not applied), and the group's script is loaded for the next
// batches.
func TestCoalescedNoScript(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("a", "v", time.Minute), acq("b", "v", time.Minute), acq("c", "v", time.Minute)}, true, true, true)
	s.Do(t, nil, "SCRIPT", "FLUSH")
	ops := []transport.Op{
		rel("a", "v"),
		rel("b", "v"),
		acq("b", "v", time.Minute), // closes the group; runs (a SET needs no script), finds b held
		rel("c", "v"),
	}
	res, err := do(tr, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK || res[0].Err != nil {
		t.Errorf("release a: %+v, want resent and OK", res[0])
	}
	if !errors.Is(res[1].Err, errNotResent) {
		t.Errorf("release b: %+v, want errNotResent (the acquire of b ran after it)", res[1])
	}
	if res[2].OK || res[2].Err != nil {
		t.Errorf("acquire b: %+v, want a definite no (b was still held)", res[2])
	}
	if !res[3].OK || res[3].Err != nil {
		t.Errorf("release c: %+v, want resent and OK (alone: no NOSCRIPT group)", res[3])
	}
	if _, ok := s.Get(t, "a"); ok {
		t.Error("a left after its resent release")
	}
	if got := scriptsLoaded(t, s); got != "1000000000010" {
		t.Errorf("SCRIPT EXISTS after the resend = %s, want the release and batch release scripts", got)
	}
}

// TestCoalescedError: when the group's script fails, every release it
// covered gets the error (never a "no"): here the master became a replica,
// so the first DEL fails with READONLY.
func TestCoalescedError(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	tr := dial(t, Config{Addr: s.Addr})
	mustDo(t, tr, []transport.Op{acq("a", "v", time.Minute), acq("b", "v", time.Minute)}, true, true)
	s.Do(t, nil, "REPLICAOF", "127.0.0.1", "1") // a master that is not there: keeps its data
	t.Cleanup(func() { s.Do(t, nil, "REPLICAOF", "NO", "ONE") })
	res, err := do(tr, rel("nope", "v"), rel("a", "v"), rel("b", "w"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "READONLY") {
			t.Errorf("release %d: %+v, want the script's READONLY error", i, r)
		}
	}
	if _, ok := s.Get(t, "a"); !ok {
		t.Error("a deleted on a replica")
	}
}
