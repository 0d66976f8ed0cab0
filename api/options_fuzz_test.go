package api_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/check"
	"github.com/quorumlock/redlock/transport"
)

// FuzzOptions applies arbitrary values through every With* option, as the
// engine does (check.Engine: each option checks its argument, then the set
// is checked as a whole). Run with go test -fuzz=FuzzOptions ./api/ ;
// without -fuzz the seeds run as a normal test.
//
// Properties: nothing panics; every error wraps ErrInvalidArgument; a set
// that is accepted is one the engine can use: a whole-millisecond TTL that
// fits Redis's PX, leaves at least 1ms after the drift allowance and does
// not exceed the quarantine period; sane retry, batching and auto-extension
// values; and giving the same per-lock options again to one lock of that
// engine is accepted and changes nothing.
func FuzzOptions(f *testing.F) {
	def := api.DefaultOptions()
	f.Add(int64(def.TTL), def.DriftFactor, int64(def.MasterTimeout), 0, int64(def.Retry.InitialInterval), int64(def.Retry.MaxInterval),
		def.Retry.Multiplier, def.Retry.RandomizationFactor, def.MaxExtensions, def.Coordinators, def.MaxBatch, def.MaxInFlight, 0.0, false, int64(0))
	f.Add(int64(time.Second), 0.01, int64(100*time.Millisecond), 3, int64(time.Millisecond), int64(time.Second), 1.5, 0.0, 0, 1, 1, 1, 0.5, false, int64(time.Second))
	f.Add(int64(3*time.Millisecond), 0.0, int64(1), 0, int64(1), int64(1), 1.0, 1.0, 0, 256, 1, 1, 0.999, true, int64(0))
	f.Add(int64(time.Millisecond), 0.01, int64(1), 0, int64(1), int64(1), 1.0, 0.5, 0, 1, 1, 1, 0.0, false, int64(0))
	f.Add(int64(1500*time.Microsecond), 0.49, int64(-1), -1, int64(0), int64(-1), math.NaN(), math.Inf(1), -1, 0, 0, 0, 1.0, false, int64(-1))
	f.Add(int64(math.MaxInt64), math.Inf(-1), int64(math.MaxInt64), math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64), math.MaxFloat64, -0.0, math.MaxInt, 257, math.MaxInt, math.MaxInt, math.NaN(), false, int64(math.MaxInt64))
	f.Add(int64(2*time.Second), 0.01, int64(time.Millisecond), 0, int64(5*time.Millisecond), int64(250*time.Millisecond), 2.0, 0.5, 1000, 2, 512, 2, 0.0, false, int64(time.Second))
	f.Add(int64(1500*time.Millisecond), 0.01, int64(time.Millisecond), 0, int64(5*time.Millisecond), int64(250*time.Millisecond), 2.0, 0.5, 1000, 2, 512, 2, 0.0, false, int64(time.Second))
	f.Fuzz(func(t *testing.T, ttl int64, drift float64, masterTimeout int64, maxAttempts int, initial, maxInterval int64,
		mult, randomization float64, maxExt, coords, maxBatch, inFlight int, auto float64, qOff bool, qPeriod int64) {
		lockOpts := []api.LockOption{
			api.WithTTL(time.Duration(ttl)),
			api.WithDriftFactor(drift),
			api.WithRetry(api.Retry{MaxAttempts: maxAttempts, InitialInterval: time.Duration(initial), MaxInterval: time.Duration(maxInterval),
				Multiplier: mult, RandomizationFactor: randomization}),
			api.WithMaxExtensions(maxExt),
			api.WithAutoExtend(auto),
			api.WithFencing(qOff),
		}
		opts := []api.Option{
			api.WithMasterTimeout(time.Duration(masterTimeout)),
			api.WithCoordinators(coords),
			api.WithBatching(maxBatch, inFlight),
		}
		for _, lo := range lockOpts {
			opts = append(opts, lo)
		}
		if qOff {
			opts = append(opts, api.WithoutRestartQuarantine())
		} else {
			opts = append(opts, api.WithRestartQuarantine(time.Duration(qPeriod)))
		}
		o, err := check.Engine(opts)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		switch {
		case o.TTL <= 0 || o.TTL%time.Millisecond != 0 || o.TTL > time.Duration(math.MaxInt32)*time.Millisecond:
			t.Fatalf("validated TTL %v: not a positive whole number of ms that fits PX", o.TTL)
		case o.TTL < time.Duration(ttl):
			t.Fatalf("validated TTL %v is shorter than the %v asked for", o.TTL, time.Duration(ttl))
		case !(o.DriftFactor >= 0 && o.DriftFactor < 0.5):
			t.Fatalf("validated drift factor %v", o.DriftFactor)
		case o.TTL-check.Drift(&o) < time.Millisecond:
			t.Fatalf("validated TTL %v leaves %v after the drift allowance", o.TTL, o.TTL-check.Drift(&o))
		case o.MasterTimeout <= 0 || o.MaxExtensions < 0 || o.Coordinators < 1 || o.Coordinators > 256 || o.MaxBatch < 1 || o.MaxInFlight < 1:
			t.Fatalf("validated engine settings %+v", o)
		case o.Retry.MaxAttempts < 0 || o.Retry.InitialInterval <= 0 || o.Retry.MaxInterval < o.Retry.InitialInterval ||
			!(o.Retry.Multiplier >= 1) || !(o.Retry.RandomizationFactor >= 0 && o.Retry.RandomizationFactor <= 1):
			t.Fatalf("validated retry %+v", o.Retry)
		case !(o.AutoExtend >= 0 && o.AutoExtend < 1):
			t.Fatalf("validated auto-extend %v", o.AutoExtend)
		case !o.Quarantine.Off && (o.Quarantine.Period < o.TTL || o.Quarantine.CheckInterval <= 0):
			t.Fatalf("validated quarantine %+v with TTL %v", o.Quarantine, o.TTL)
		}
		again, err := check.Lock(o, lockOpts)
		if err != nil || again != o {
			t.Fatalf("the engine's own lock options again: %v, %+v -> %+v", err, o, again)
		}
	})
}

// FuzzCheckKeys checks the keys Lock and LockAll accept (check.Key and
// check.Keys) against their definition on the Locker methods, on arbitrary
// keys (newline-separated for LockAll).
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{"", "k", "inventory:sku-42", "a\nb", "a\na", "a\n\nb", "\n", transport.FencePrefix + "x",
		"x" + transport.FencePrefix, strings.Repeat("k", check.MaxKeyLen), strings.Repeat("k", check.MaxKeyLen+1),
		strings.Repeat("k\n", check.MaxKeys), strings.Repeat("k\n", check.MaxKeys+1), "\x00\xff", "ключ\n鍵"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		valid := func(k string) bool {
			return len(k) >= 1 && len(k) <= check.MaxKeyLen && !strings.HasPrefix(k, transport.FencePrefix)
		}
		verify := func(what string, err error, want bool) {
			t.Helper()
			if (err == nil) != want {
				t.Fatalf("%s = %v, want valid=%v", what, err, want)
			}
			if err != nil && !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("%s = %v: does not wrap ErrInvalidArgument", what, err)
			}
		}
		verify("Key", check.Key(s), valid(s))
		keys := strings.Split(s, "\n")
		want := len(keys) >= 1 && len(keys) <= check.MaxKeys
		seen := map[string]bool{}
		for _, k := range keys {
			if !valid(k) || seen[k] {
				want = false
			}
			seen[k] = true
		}
		verify("Keys", check.Keys(keys), want)
	})
}
