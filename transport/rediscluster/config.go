package rediscluster

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/quorumlock/redlock/transport/redis"
)

// The address schemes of a cluster master: redis+cluster:// and, with TLS,
// rediss+cluster://.
const (
	Scheme    = "redis+cluster"
	SchemeTLS = "rediss+cluster"
)

// Config configures one cluster, which is one master to the engine.
type Config struct {
	// Seeds are host:port addresses of some of the cluster's nodes; the
	// slot map is read from the first that answers.
	Seeds []string
	// Node is the per-node connection settings (credentials, TLS, timeouts,
	// reconnect backoff); its Addr is ignored and its FenceKey replaced.
	Node redis.Config
	// AllowFailover accepts a cluster whose masters have replicas. A
	// replica promoted by automatic failover may lack keys its master
	// acknowledged (replication is asynchronous), which is a restart
	// without persistence that no run id check can see in time. Without
	// it, such a cluster answers every op with ErrFailoverRisk.
	AllowFailover bool
	// RefreshInterval is how often the slot map is read again even when no
	// MOVED reply asked for it (a failover, a node added). Default 1s.
	RefreshInterval time.Duration
}

// IsAddr reports whether s names a cluster (redis+cluster:// or
// rediss+cluster://).
func IsAddr(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, Scheme+"://") || strings.HasPrefix(l, SchemeTLS+"://")
}

// ParseAddr parses "redis+cluster://[user:password@]host:port[,host:port...][?allow-failover=true]"
// ("rediss+cluster://" for TLS). Seeds may also be separated by ';', for
// lists of masters that are themselves comma-separated (redlock --nodes). Each host's port defaults to 6379. A
// cluster has only database 0, so a path is refused. Errors wrap
// redis.ErrBadAddress and say what to fix; they never quote a password.
func ParseAddr(s string) (Config, error) {
	var cfg Config
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !IsAddr(s) {
		return cfg, bad(s, "want %s://host:port[,host:port...] or %s://...", Scheme, SchemeTLS)
	}
	inner := "redis"
	if strings.EqualFold(scheme, SchemeTLS) {
		inner = "rediss"
		cfg.Node.TLS = true
	}
	if q := strings.LastIndex(rest, "?"); q >= 0 && !strings.Contains(rest[q:], "@") {
		vals, err := url.ParseQuery(rest[q+1:])
		if err != nil {
			return Config{}, bad(s, "query %q: %v", rest[q+1:], err)
		}
		for k, v := range vals {
			switch k {
			case "allow-failover":
				switch strings.ToLower(v[len(v)-1]) {
				case "true", "1", "yes":
					cfg.AllowFailover = true
				case "false", "0", "no":
				default:
					return Config{}, bad(s, "allow-failover=%q: want true or false", v[len(v)-1])
				}
			default:
				return Config{}, bad(s, "unknown parameter %q; the only one is allow-failover=true", k)
			}
		}
		rest = rest[:q]
	}
	user := ""
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, rest = rest[:at+1], rest[at+1:]
	}
	if strings.Contains(rest, "/") {
		return Config{}, bad(s, "a cluster has only database 0: drop the path")
	}
	if rest == "" {
		return Config{}, bad(s, "no nodes; want %s://host:port[,host:port...]", Scheme)
	}
	seen := map[string]bool{}
	// ';' too: in a comma-separated list of masters (redlock --nodes, the
	// REDLOCK_NODES variable) a cluster's seeds cannot be split by commas.
	for i, h := range strings.Split(strings.ReplaceAll(rest, ";", ","), ",") {
		if h == "" {
			return Config{}, bad(s, "empty node %d in the list", i+1)
		}
		p, err := redis.ParseAddr(inner + "://" + user + h)
		if err != nil {
			return Config{}, err
		}
		if i == 0 {
			cfg.Node.Username, cfg.Node.Password = p.Username, p.Password
		}
		if !seen[p.Addr] {
			seen[p.Addr] = true
			cfg.Seeds = append(cfg.Seeds, p.Addr)
		}
	}
	return cfg, nil
}

func bad(s, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", redis.ErrBadAddress, redact(s), fmt.Sprintf(format, args...))
}

func redact(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	if at := strings.LastIndex(s[i+3:], "@"); at >= 0 {
		return s[:i+3] + "***@" + s[i+3+at+1:]
	}
	return s
}
