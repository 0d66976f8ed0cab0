package main

import (
	"testing"
)

// The four single-server fault kinds on clusters (issue 14): each is
// counted where it bit, not just where it was injected: connections reset
// by the shard proxies (the clients went through them, redirects
// included), keys written on the spares an address flipped to, NOSCRIPT
// answered by flushed shards, stale writes of paused workers refused.
func TestTortureClusterFaults(t *testing.T) {
	r := redlock(t, nil, "torture", "--cluster-shards", "2", "--faults", "proxy,script-flush,address-flip,client-pause",
		"--duration", "20s", "--seed", "1", "--progress", "0", "--json")
	rep := decodeTorture(t, r.stdout)
	if r.code != 0 || rep.Violations.Count != 0 {
		t.Fatalf("exit %d, want 0; violations: %+v", r.code, rep.Violations)
	}
	t.Logf("grants %d, faults %v, detail %v", rep.Grants, rep.Faults, rep.FaultDetail)
	for _, k := range []string{"proxy", "script-flush", "address-flip", "client-pause"} {
		if rep.Faults[k] == 0 {
			t.Errorf("no %s fault in 20s: %v", k, rep.Faults)
		}
	}
	for _, k := range []string{"proxy.reset_conns", "address-flip.spare_keys", "address-flip.conns_reset", "script-flush.noscript"} {
		if rep.FaultDetail[k] == 0 {
			t.Errorf("fault detail %s is 0: the fault did not bite (%v)", k, rep.FaultDetail)
		}
	}
	if p := rep.ClientPause; p == nil || p.StaleRefused == 0 || p.StaleAccepted != 0 {
		t.Errorf("client pause %+v: want stale writes refused, none accepted", p)
	}
}

// The negative controls on clusters: an address flip of a majority's
// shards without the restart quarantine grants a held key again (overlap),
// and client-pause without fencing lets a paused holder's late write in
// (late-write). Both exit 1.
func TestTortureClusterNegativeControls(t *testing.T) {
	t.Run("address-flip", func(t *testing.T) {
		r := redlock(t, nil, "torture", "--cluster-shards", "2", "--faults", "address-flip", "--no-quarantine",
			"--duration", "20s", "--seed", "1", "--progress", "0", "--json")
		rep := decodeTorture(t, r.stdout)
		if r.code != exitFailure || rep.Violations.ByKind["overlap"] == 0 {
			t.Fatalf("exit %d, violations %v (faults %v): want %d with overlaps", r.code, rep.Violations.ByKind, rep.FaultDetail, exitFailure)
		}
	})
	t.Run("client-pause", func(t *testing.T) {
		r := redlock(t, nil, "torture", "--cluster-shards", "2", "--faults", "client-pause", "--no-fencing",
			"--duration", "15s", "--fault-interval", "500ms", "--engines", "1", "--clients", "4", "--keys", "4",
			"--seed", "3", "--progress", "0", "--json")
		rep := decodeTorture(t, r.stdout)
		if r.code != exitFailure || rep.Violations.ByKind["late-write"] == 0 {
			t.Fatalf("exit %d, violations %v: want %d with late-write", r.code, rep.Violations.ByKind, exitFailure)
		}
	})
}
