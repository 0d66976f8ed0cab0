// Package check holds the engine's checks of user input that are not on
// the api package's page: lock keys, and the options as a whole. Each
// api.With* function checks its own argument; what no single option can
// see (a TTL too short for its drift allowance, longer than the restart
// quarantine) is checked here, once, after all of them are applied.
package check

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/transport"
)

// MaxKeyLen is the longest key the engine accepts, in bytes. Redis itself
// allows far longer keys, but a lock key is a name, and a bound keeps a bad
// key (a whole request body, say) from being copied to every master.
const MaxKeyLen = 1024

// MaxKeys is the most keys one multi-key lock may have.
const MaxKeys = 64

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{api.ErrInvalidArgument}, args...)...)
}

// Key reports why key cannot be a lock key, or nil.
func Key(key string) error {
	if key == "" {
		return invalid("empty key: give the lock a name")
	}
	if len(key) > MaxKeyLen {
		return invalid("key of %d bytes is longer than the %d-byte limit: use a shorter name (a hash of a long one)", len(key), MaxKeyLen)
	}
	if strings.HasPrefix(key, transport.FencePrefix) {
		return invalid("key %q starts with %q, which names fencing counters: choose another name", key, transport.FencePrefix)
	}
	return nil
}

// Keys reports why keys cannot be the keys of one multi-key lock, or nil.
func Keys(keys []string) error {
	if len(keys) == 0 {
		return invalid("no keys: give at least one")
	}
	if len(keys) > MaxKeys {
		return invalid("%d keys: at most %d in one lock", len(keys), MaxKeys)
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if err := Key(k); err != nil {
			return err
		}
		if _, dup := seen[k]; dup {
			return invalid("key %q is listed twice: list each key once", k)
		}
		seen[k] = struct{}{}
	}
	return nil
}

// Drift is the allowance subtracted from every validity:
// TTL*DriftFactor + 2ms.
func Drift(o *api.Options) time.Duration {
	return time.Duration(float64(o.TTL)*o.DriftFactor) + 2*time.Millisecond
}

// Engine applies opts over api.DefaultOptions and checks the result: the
// engine's options. Nil options are skipped. A restart quarantine left at
// its default gets the engine's TTL as its period.
func Engine(opts []api.Option) (api.Options, error) {
	o := api.DefaultOptions()
	if err := apply(&o, opts); err != nil {
		return o, err
	}
	if err := whole(&o); err != nil {
		return o, err
	}
	if !o.Quarantine.Off && o.Quarantine.Period == 0 {
		o.Quarantine.Period = o.TTL
	}
	return o, nil
}

// Lock applies opts over base, the engine's options, and checks the
// result: the options of one lock.
func Lock(base api.Options, opts []api.LockOption) (api.Options, error) {
	o := base
	if err := apply(&o, opts); err != nil {
		return o, err
	}
	return o, whole(&o)
}

// applier is what every option of package api implements (on an unexported
// type, so that the method is not on api's page).
type applier interface{ Apply(*api.Options) error }

func apply[O api.Option](o *api.Options, opts []O) error {
	for _, opt := range opts {
		a, ok := any(opt).(applier)
		if !ok {
			continue // nil: api.Option is sealed, so nothing else lacks Apply
		}
		if err := a.Apply(o); err != nil {
			return err
		}
	}
	return nil
}

// whole checks what single options cannot: how they go together.
func whole(o *api.Options) error {
	if o.TTL-Drift(o) < time.Millisecond {
		return invalid("ttl %v is too short for its clock-drift allowance %v: use a ttl of at least %v",
			o.TTL, Drift(o), minTTL(o.DriftFactor))
	}
	if q := o.Quarantine; !q.Off && q.Period > 0 && o.TTL > q.Period {
		return invalid("ttl %v is longer than the restart quarantine %v: a restarted master could vote while it still owed this lock; raise the quarantine with WithRestartQuarantine", o.TTL, q.Period)
	}
	return nil
}

// minTTL is the smallest TTL whose validity can be at least 1ms.
func minTTL(f float64) time.Duration {
	return time.Duration(math.Ceil(3/(1-f))) * time.Millisecond
}
