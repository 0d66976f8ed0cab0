package redis

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseAddr(t *testing.T) {
	valid := []struct {
		in   string
		want Config
	}{
		{"127.0.0.1:6379", Config{Addr: "127.0.0.1:6379"}},
		{"localhost:1", Config{Addr: "localhost:1"}},
		{"[::1]:6379", Config{Addr: "[::1]:6379"}},
		{"h:06379", Config{Addr: "h:6379"}},
		{"redis://h:1", Config{Addr: "h:1"}},
		{"redis://h", Config{Addr: "h:6379"}},
		{"redis://h:1/", Config{Addr: "h:1"}},
		{"redis://[::1]:7000", Config{Addr: "[::1]:7000"}},
		{"redis://[::1]", Config{Addr: "[::1]:6379"}},
		{"redis://user:pw@h:1/2", Config{Addr: "h:1", Username: "user", Password: "pw", DB: 2}},
		{"redis://:secret@h:1", Config{Addr: "h:1", Password: "secret"}},
		{"redis://user@h:1", Config{Addr: "h:1", Username: "user"}},
		{"redis://u:p%40ss@h:1/0", Config{Addr: "h:1", Username: "u", Password: "p@ss"}},
		{"rediss://h:1", Config{Addr: "h:1", TLS: true}},
		{"rediss://u:p@h:1/15", Config{Addr: "h:1", Username: "u", Password: "p", DB: 15, TLS: true}},
	}
	for _, tc := range valid {
		got, err := ParseAddr(tc.in)
		if err != nil {
			t.Errorf("ParseAddr(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseAddr(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		// Normalised addresses parse to themselves.
		if again, err := ParseAddr(got.Addr); err != nil || again.Addr != got.Addr {
			t.Errorf("ParseAddr(%q) = %+v, %v; want it unchanged", got.Addr, again, err)
		}
	}

	malformed := []struct {
		in   string
		hint string // the message must say what to fix
	}{
		{"", "empty address"},
		{"h", "missing port"},
		{"h:", "empty port"},
		{":6379", "missing host"},
		{"h:0", "out of range"},
		{"h:70000", "out of range"},
		{"h:-1", "out of range"},
		{"h:abc", "not a number"},
		{"::1:6379", "brackets"},
		{"http://h:1", `unknown scheme "http"`},
		{"tcp://h:1", "use redis:// or rediss://"},
		{"redis://h:1/x", `db "x" is not a database number`},
		{"redis://h:1/-1", `db "-1" is not a database number`},
		{"redis://h:1/1/2", "not a database number"},
		{"redis://h:abc", "invalid port"},
		{"redis://h:0", "out of range"},
		{"redis://h:1?db=2", "put the db number in the path"},
		{"redis://", "missing host"},
		{"redis://:pw@:1", "missing host"},
	}
	for _, tc := range malformed {
		_, err := ParseAddr(tc.in)
		if !errors.Is(err, ErrBadAddress) {
			t.Errorf("ParseAddr(%q) = %v, want an error wrapping ErrBadAddress", tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("ParseAddr(%q) = %q, want it to say %q", tc.in, err, tc.hint)
		}
	}
}

func TestParseAddrHidesPassword(t *testing.T) {
	for _, in := range []string{"redis://u:hunter2@h:abc", "redis://u:hunter2@h:1/x", "http://u:hunter2@h:1"} {
		_, err := ParseAddr(in)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseAddr(%q) = %v, want an error without the password", in, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{Addr: "h"}); !errors.Is(err, ErrBadAddress) {
		t.Errorf("New with a bad address: %v, want ErrBadAddress", err)
	}
	if _, err := New(Config{Addr: "h:1", OpTimeout: -time.Second}); !errors.Is(err, ErrBadAddress) {
		t.Errorf("New with a negative OpTimeout: %v, want ErrBadAddress", err)
	}
	r, err := Config{Addr: "redis://u:p@h:1/3", Password: "explicit", DB: 5}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Username != "u" || r.Password != "explicit" || r.DB != 5 || r.hostport != "h:1" {
		t.Errorf("explicit fields must win over the URL: %+v", r)
	}
	if r.DialTimeout != DefaultDialTimeout || r.OpTimeout != DefaultOpTimeout {
		t.Errorf("defaults not applied: %+v", r)
	}
}

func TestParseServerInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n"
	si, err := parseServerInfo("x", info)
	// 42 truncated wall-clock seconds may be 41.001 real ones: never report
	// more uptime than there was (it ends a restart quarantine).
	if err != nil || si.RunID != "abc123" || si.Uptime != 41*time.Second {
		t.Fatalf("parseServerInfo = %+v, %v; want uptime 41s", si, err)
	}
	si, err = parseServerInfo("x", "run_id:r\r\nuptime_in_seconds:0\r\n")
	if err != nil || si.Uptime != 0 {
		t.Fatalf("uptime 0: %+v, %v", si, err)
	}
	if _, err := parseServerInfo("x", "# Server\r\n"); err == nil {
		t.Error("parseServerInfo without the fields succeeded")
	}
	// The role and the eviction settings, from their sections of INFO.
	const id = "run_id:r\r\nuptime_in_seconds:9\r\n"
	for _, c := range []struct {
		info                string
		replicaOf, eviction string
	}{
		{id + "# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n# Replication\r\nrole:master\r\n", "", ""},
		{id + "maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n", "", ""}, // no limit: nothing evicted
		{id + "maxmemory:1048576\r\nmaxmemory_policy:noeviction\r\n", "", ""},
		{id + "maxmemory:1048576\r\nmaxmemory_policy:volatile-ttl\r\n", "", "maxmemory-policy volatile-ttl with maxmemory 1048576 bytes"},
		{id + "role:slave\r\nmaster_host:10.0.0.7\r\nmaster_port:6380\r\n", "10.0.0.7:6380", ""},
		{id + "role:slave\r\nmaster_host:::1\r\nmaster_port:6380\r\n", "[::1]:6380", ""},
		{id, "", ""}, // a server that says nothing of either
	} {
		si, err := parseServerInfo("x", c.info)
		if err != nil || si.ReplicaOf != c.replicaOf || si.Eviction != c.eviction {
			t.Errorf("parseServerInfo(%q) = %+v, %v; want ReplicaOf %q, Eviction %q", c.info, si, err, c.replicaOf, c.eviction)
		}
	}
	if _, err := parseServerInfo("x", id+"maxmemory:lots\r\n"); err == nil {
		t.Error("parseServerInfo with maxmemory:lots succeeded")
	}
	// evicted_keys, from INFO stats: the engine compares it between reads.
	if si, err := parseServerInfo("x", id+"# Stats\r\nexpired_keys:3\r\nevicted_keys:17\r\n"); err != nil || si.Evicted != 17 {
		t.Errorf("evicted_keys:17 = %+v, %v; want Evicted 17", si, err)
	}
	if _, err := parseServerInfo("x", id+"evicted_keys:-1\r\n"); err == nil {
		t.Error("parseServerInfo with evicted_keys:-1 succeeded")
	}
}
