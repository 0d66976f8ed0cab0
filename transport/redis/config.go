package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrBadAddress is wrapped by every error that ParseAddr, New and Dial return
// for a malformed address or Config (such as a negative timeout).
var ErrBadAddress = errors.New("bad redis address")

// Defaults for the zero values of Config's fields.
const (
	DefaultDialTimeout      = time.Second
	DefaultOpTimeout        = time.Second
	DefaultReconnectInitial = 25 * time.Millisecond
	DefaultReconnectMax     = time.Second
	defaultPort             = "6379"
)

// Config configures one master. Only Addr is required.
type Config struct {
	// Addr is "host:port", "[ipv6]:port", or a URL
	// "redis://[user:password@]host[:port][/db]" ("rediss://" for TLS). A
	// URL's port defaults to 6379; a bare host:port must name its port.
	// Credentials and db in the URL are used unless the fields below are
	// set.
	Addr string

	// Username and Password authenticate with AUTH (Password alone: the
	// "default" user, or requirepass).
	Username, Password string
	// DB is the database SELECTed on connect.
	DB int
	// TLS connects with TLS; implied by a rediss:// Addr.
	TLS bool
	// TLSConfig overrides the TLS settings. Its ServerName defaults to the
	// host of Addr. It does not by itself turn TLS on.
	TLSConfig *tls.Config

	// DialTimeout bounds each connection attempt, including AUTH, SELECT
	// and loading the scripts. Default 1s.
	DialTimeout time.Duration
	// OpTimeout is the deadline for a batch whose context has none. The
	// engine passes its own deadline; this only guards other callers
	// against a master that never answers. Default 1s.
	OpTimeout time.Duration

	// ReconnectInitial and ReconnectMax bound the randomized exponential
	// delay between failed connection attempts. Defaults 25ms and 1s: a
	// lock client wants a restarted master back quickly, and an attempt on
	// a dead loopback or LAN master costs almost nothing.
	ReconnectInitial, ReconnectMax time.Duration

	// WriteFlushInterval lets the connection collect concurrent batches for
	// up to this long before writing them together: fewer system calls
	// under heavy concurrency at the cost of up to this much latency. 0
	// (the default) writes each batch at once, which suits the engine's
	// already batched traffic.
	WriteFlushInterval time.Duration

	// ClusterFenceKeys names fencing counters with ClusterFenceKey rather
	// than transport.FenceKey, so that each lands in its key's Redis
	// Cluster slot. The cluster transport (transport/rediscluster) sets it
	// on its nodes; a single server keeps the names it always had.
	ClusterFenceKeys bool

	// Coalesce is the most plain single-key Releases (or Extends) of one
	// batch sent as one script (ReleaseBatchScript, ExtendBatchScript),
	// which costs the master about a third less CPU per op than a script
	// per key. 0 means DefaultCoalesce; 1 sends each op alone (for a proxy
	// that cannot run a script over keys it shards apart); at most
	// MaxCoalesce. Cluster nodes never coalesce.
	Coalesce int
}

// ParseAddr validates an address (see Config.Addr) and returns a Config with
// Addr normalised to host:port and the URL's credentials, db and TLS moved to
// their fields. Errors wrap ErrBadAddress and say what to fix.
func ParseAddr(s string) (Config, error) {
	var cfg Config
	if s == "" {
		return cfg, badAddr(s, "empty address; want host:port, redis://host:port or rediss://host:port")
	}
	hostport := s
	defPort := ""
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			// url.Error repeats the whole URL, password included; keep only
			// the reason.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			if strings.Contains(s, "@") {
				// The parser's reason may quote part of the password (it
				// takes ":secret" for a port): say what to do instead.
				return cfg, badAddr(s, "not a valid URL; a password containing '/', '?', '#', '@' or '%%' must be percent-encoded (%%2F, %%3F, %%23, %%40, %%25); want redis://[user:password@]host:port[/db]")
			}
			return cfg, badAddr(s, "not a valid URL: %v; want redis://[user:password@]host:port[/db]", err)
		}
		switch u.Scheme {
		case "redis":
		case "rediss":
			cfg.TLS = true
		default:
			return cfg, badAddr(s, "unknown scheme %q; use redis:// or rediss:// (TLS)", u.Scheme)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return cfg, badAddr(s, "query parameters and fragments are not supported; put the db number in the path, as in redis://host:6379/2")
		}
		if u.User != nil {
			cfg.Username = u.User.Username()
			cfg.Password, _ = u.User.Password()
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			n, err := strconv.Atoi(db)
			if err != nil || n < 0 {
				if strings.Contains(db, "@") {
					// Most likely a password with a '/' in it: do not
					// quote what may be the rest of it.
					return cfg, badAddr(s, "the path is not a database number; a password containing '/', '?', '#' or '@' must be percent-encoded (%%2F, %%3F, %%23, %%40)")
				}
				return cfg, badAddr(s, "db %q is not a database number; want a number >= 0, as in redis://host:6379/2", db)
			}
			cfg.DB = n
		}
		hostport = u.Host
		defPort = defaultPort
	}
	host, port, err := splitHostPort(s, hostport, defPort)
	if err != nil {
		return Config{}, err
	}
	cfg.Addr = net.JoinHostPort(host, port)
	// What we hand on must parse again: a URL host such as "]0" slips past
	// the missing-port path above.
	if h, _, err := net.SplitHostPort(cfg.Addr); err != nil || h == "" || strings.ContainsAny(h, "[]/@") {
		return Config{}, badAddr(s, "host %q is not a host name or IP address", host)
	}
	return cfg, nil
}

func splitHostPort(orig, hostport, defPort string) (host, port string, err error) {
	if hostport == "" {
		return "", "", badAddr(orig, "missing host; want host:port, as in 127.0.0.1:6379")
	}
	host, port, err = net.SplitHostPort(hostport)
	if err != nil {
		var ae *net.AddrError
		switch {
		case defPort != "" && errors.As(err, &ae) && ae.Err == "missing port in address":
			host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defPort
		case strings.Count(hostport, ":") > 1 && !strings.HasPrefix(hostport, "["):
			return "", "", badAddr(orig, "IPv6 addresses need brackets, as in [::1]:6379")
		case !strings.Contains(hostport, ":"):
			return "", "", badAddr(orig, "missing port; want host:port, as in %s:6379", hostport)
		default:
			return "", "", badAddr(orig, "want host:port, as in 127.0.0.1:6379 (%v)", err)
		}
	}
	if host == "" {
		return "", "", badAddr(orig, "missing host; want host:port, as in 127.0.0.1:6379")
	}
	if port == "" {
		return "", "", badAddr(orig, "empty port; want host:port, as in %s:6379", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", "", badAddr(orig, "port %q is not a number; want host:port, as in %s:6379", port, host)
	}
	if n < 1 || n > 65535 {
		return "", "", badAddr(orig, "port %d is out of range; want 1-65535", n)
	}
	return host, strconv.Itoa(n), nil
}

func badAddr(addr, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrBadAddress, redact(addr), fmt.Sprintf(format, args...))
}

// redact hides a URL's userinfo, so that a password never lands in an error
// message or a log.
func redact(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	// The last '@' of the whole string: a password may itself hold '/',
	// '?' or '#' (base64 does), which must not end the search early.
	rest := s[i+3:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return s[:i+3] + "***@" + rest[at+1:]
	}
	return s
}

// resolved is a Config with its defaults applied and its address parsed.
type resolved struct {
	Config
	hostport, serverName string
}

func (cfg Config) resolve() (resolved, error) {
	p, err := ParseAddr(cfg.Addr)
	if err != nil {
		return resolved{}, err
	}
	r := resolved{Config: cfg, hostport: p.Addr}
	r.Addr = p.Addr
	// Explicit fields win over the URL, as in radix's Dialer.
	if r.Username == "" {
		r.Username = p.Username
	}
	if r.Password == "" {
		r.Password = p.Password
	}
	if r.DB == 0 {
		r.DB = p.DB
	}
	r.TLS = r.TLS || p.TLS
	if r.DB < 0 {
		return resolved{}, badAddr(cfg.Addr, "DB %d is negative", r.DB)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &r.DialTimeout, DefaultDialTimeout},
		{"OpTimeout", &r.OpTimeout, DefaultOpTimeout},
		{"ReconnectInitial", &r.ReconnectInitial, DefaultReconnectInitial},
		{"ReconnectMax", &r.ReconnectMax, DefaultReconnectMax},
	} {
		switch {
		case *d.v < 0:
			return resolved{}, fmt.Errorf("%w: redis %s: %s %v is negative", ErrBadAddress, r.hostport, d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	switch {
	case r.Coalesce < 0 || r.Coalesce > MaxCoalesce:
		return resolved{}, fmt.Errorf("%w: redis %s: Coalesce %d is outside 0..%d", ErrBadAddress, r.hostport, r.Coalesce, MaxCoalesce)
	case r.Coalesce == 0:
		r.Coalesce = DefaultCoalesce
	}
	if r.ReconnectMax < r.ReconnectInitial {
		r.ReconnectMax = r.ReconnectInitial
	}
	if r.WriteFlushInterval < 0 {
		return resolved{}, fmt.Errorf("%w: redis %s: WriteFlushInterval %v is negative", ErrBadAddress, r.hostport, r.WriteFlushInterval)
	}
	r.serverName, _, _ = net.SplitHostPort(r.hostport)
	return r, nil
}
