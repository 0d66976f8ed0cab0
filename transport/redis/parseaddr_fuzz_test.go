package redis

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseAddr feeds ParseAddr arbitrary addresses. Run with
// go test -fuzz=FuzzParseAddr ./transport/redis/ ; without -fuzz the seeds
// run as a normal test.
//
// Properties: it never panics; an error wraps ErrBadAddress and never shows
// the URL's password; a success is a host:port with a port in 1-65535 and
// no leading zeros, a db >= 0, TLS exactly for rediss://, and parsing its
// Addr again gives the same Addr and nothing else.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{
		"", "h", "h:", ":6379", "h:0", "h:1", "h:65535", "h:65536", "h:06379", "h:-1", "h:abc", "h: 1",
		"127.0.0.1:6379", "[::1]:6379", "::1:6379", "[::1]", "[fe80::1%eth0]:6379", "[::1]:", "[]:1",
		"redis://h", "redis://h:1", "redis://h:1/", "redis://h:1/2", "redis://h:1/x", "redis://h:1/-1", "redis://h:1/1/2",
		"redis://[::1]", "redis://[::1]:7000", "redis://user:pw@h:1/2", "redis://:secret@h:1", "redis://user@h:1",
		"redis://u:p%40ss@h:1/0", "redis://u:p%zz@h:1", "redis://u:p ss@h:1", "rediss://h:1", "rediss://u:p@h:1/15",
		"redis://", "redis://:pw@:1", "redis://h:1?db=2", "redis://h:1#x", "redis://h:1?", "http://u:hunter2@h:1",
		"redis:h:1", "redis:/h:1", "REDIS://h:1", "redis://h:99999999999999999999", "redis://h:1/99999999999999999999",
		"redis://u:pw@h:abc", "redis://u:pw@h:1/x", "redis://a@b@h:1", "redis://h:1:2", "redis://%41:1",
		// Found by fuzzing (fixed in 1fa88a1): passwords with '/', '?' or '#'
		// were shown; a URL host that is not a host was accepted.
		"redis://u:hunter2/x@h:1", "redis://u:hunter2?x@h:1", "redis://:hunter2#x@h:1", "redis://]0", "redis://a]b",
		"redisS://0", "//:0000000@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseAddr(s)
		if err != nil {
			if !errors.Is(err, ErrBadAddress) {
				t.Fatalf("ParseAddr(%q) = %v: does not wrap ErrBadAddress", s, err)
			}
			if pw := urlPassword(s); pw != "" && strings.Contains(err.Error(), pw) {
				t.Fatalf("ParseAddr(%q) = %q: shows the password %q", s, err, pw)
			}
			return
		}
		host, port, serr := net.SplitHostPort(cfg.Addr)
		if serr != nil || host == "" {
			t.Fatalf("ParseAddr(%q).Addr = %q: not host:port (%v)", s, cfg.Addr, serr)
		}
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			t.Fatalf("ParseAddr(%q).Addr = %q: port %q not normalised to 1-65535", s, cfg.Addr, port)
		}
		if cfg.DB < 0 {
			t.Fatalf("ParseAddr(%q).DB = %d", s, cfg.DB)
		}
		if cfg.TLS != strings.HasPrefix(strings.ToLower(s), "rediss://") { // schemes are case-insensitive
			t.Fatalf("ParseAddr(%q).TLS = %v", s, cfg.TLS)
		}
		again, err := ParseAddr(cfg.Addr)
		if err != nil || again != (Config{Addr: cfg.Addr}) {
			t.Fatalf("ParseAddr(%q) = %+v, %v: its Addr %q does not parse to itself", s, again, err, cfg.Addr)
		}
	})
}

// urlPassword is the password a URL s carries, when it is distinctive
// enough to look for in a message: 6 or more bytes, found nowhere else in s,
// and not a word the messages use. The password is what a person meant:
// everything between the first ':' after "scheme://" and the last '@'
// (slashes and all, as in an unescaped base64 password), or, failing that,
// what net/url finds.
func urlPassword(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return "" // ParseAddr reads it as host:port, not as a URL
	}
	var pw string
	rest := s[i+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if _, p, ok := strings.Cut(rest[:at], ":"); ok {
			pw = p
		}
	}
	if pw == "" {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			pw, _ = u.User.Password()
		}
	}
	if len(pw) < 6 || strings.Count(s, pw) != 1 || strings.Contains("redis://[user:password@]host:port[/db] rediss:// (%2F, %3F, %23, %40)", pw) {
		return ""
	}
	// The message quotes what is left of s; quoting can spell pw by itself
	// ("\x00" then "0000" reads "\x000000").
	if strings.Contains(strconv.Quote(strings.Replace(s, pw, "", 1)), pw) {
		return ""
	}
	return pw
}

// FuzzParseServerInfo feeds the INFO server parser arbitrary replies: it
// never panics, and a success has a run id.
func FuzzParseServerInfo(f *testing.F) {
	f.Add("# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n")
	f.Add("run_id:x\nuptime_in_seconds:0\n")
	f.Add("run_id:\r\nuptime_in_seconds:1\r\n")
	f.Add("uptime_in_seconds:x\r\nrun_id:y\r\n")
	f.Add("run_id:a:b\r\nuptime_in_seconds:-1\r\n")
	f.Add("run_id:r\r\nuptime_in_seconds:1\r\nrole:slave\r\nmaster_host:h\r\nmaster_port:1\r\nmaxmemory:9\r\nmaxmemory_policy:allkeys-lru\r\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, info string) {
		si, err := parseServerInfo("h:1", info)
		if err == nil && si.RunID == "" {
			t.Fatalf("parseServerInfo(%q) = %+v: success without a run id", info, si)
		}
	})
}

// TestParseAddrHidesPasswordWithSlash: a password with an unescaped '/',
// '?' or '#' (base64 passwords often have a '/') makes the URL invalid; the
// error used to show the whole address, password included, as redact only
// looked for '@' before the first '/', '?' or '#' (fixed in 1fa88a1).
func TestParseAddrHidesPasswordWithSlash(t *testing.T) {
	for _, s := range []string{"redis://u:hunter2/x@h:1", "redis://u:hunter2?x@h:1", "redis://:hunter2#x@h:1"} {
		if _, err := ParseAddr(s); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseAddr(%q) = %v: shows the password", s, err)
		}
	}
}

// TestParseAddrRejectsNonHost: found by FuzzParseAddr. A URL whose host is
// not a host, such as "redis://]0", was accepted with Addr "]0:6379", which
// is not a host:port at all: the missing-port branch of splitHostPort
// trusted what it trimmed (fixed in 1fa88a1).
func TestParseAddrRejectsNonHost(t *testing.T) {
	for _, s := range []string{"redis://]0", "redis://a]b"} {
		if cfg, err := ParseAddr(s); err == nil {
			t.Errorf("ParseAddr(%q) = %+v, want an error: %q is not host:port", s, cfg, cfg.Addr)
		}
	}
}

// TestParseAddrHidesPasswordInPath: found by FuzzParseAddr after the fix of
// 1fa88a1. A password with a '/' whose first part looks like a port
// ("6379/s3cr3tPW") makes a valid URL with the rest of the password in the
// path, and the db error quotes the path: `db "s3cr3tPW@h:1" is not a
// database number`. Fixed; kept as a regression test.
func TestParseAddrHidesPasswordInPath(t *testing.T) {
	for _, s := range []string{"redis://u:6379/s3cr3tPW@h:1", "redis://:12/abcdEFGH@host:6379"} {
		if _, err := ParseAddr(s); err == nil || strings.Contains(err.Error(), "s3cr3tPW") || strings.Contains(err.Error(), "abcdEFGH") {
			t.Errorf("ParseAddr(%q) = %v: shows part of the password", s, err)
		}
	}
}
