package api_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
)

// FuzzOptions applies arbitrary values through every With* option and
// Validate. Run with go test -fuzz=FuzzOptions ./api/ ; without -fuzz the
// seeds run as a normal test.
//
// Properties: nothing panics; every error wraps ErrInvalidArgument; a set
// that validates is one the engine can use: a whole-millisecond TTL that
// fits Redis's PX, leaves at least 1ms after the drift allowance and does
// not exceed the quarantine period; sane retry, batching and auto-extension
// values; and validating it again changes nothing.
func FuzzOptions(f *testing.F) {
	def := api.DefaultOptions()
	f.Add(int64(def.TTL), def.DriftFactor, int64(def.MasterTimeout), 0, int64(def.Retry.InitialInterval), int64(def.Retry.MaxInterval),
		def.Retry.Multiplier, def.Retry.RandomizationFactor, def.MaxExtensions, def.Coordinators, def.MaxBatch, def.MaxInFlight, 0.0, false, int64(0), int64(time.Second))
	f.Add(int64(time.Second), 0.01, int64(100*time.Millisecond), 3, int64(time.Millisecond), int64(time.Second), 1.5, 0.0, 0, 1, 1, 1, 0.5, false, int64(time.Second), int64(time.Second))
	f.Add(int64(3*time.Millisecond), 0.0, int64(1), 0, int64(1), int64(1), 1.0, 1.0, 0, 256, 1, 1, 0.999, true, int64(0), int64(0))
	f.Add(int64(time.Millisecond), 0.01, int64(1), 0, int64(1), int64(1), 1.0, 0.5, 0, 1, 1, 1, 0.0, false, int64(0), int64(time.Second))
	f.Add(int64(1500*time.Microsecond), 0.49, int64(-1), -1, int64(0), int64(-1), math.NaN(), math.Inf(1), -1, 0, 0, 0, 1.0, false, int64(-1), int64(0))
	f.Add(int64(math.MaxInt64), math.Inf(-1), int64(math.MaxInt64), math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64), math.MaxFloat64, -0.0, math.MaxInt, 257, math.MaxInt, math.MaxInt, math.NaN(), false, int64(math.MaxInt64), int64(math.MinInt64))
	f.Add(int64(2*time.Second), 0.01, int64(time.Millisecond), 0, int64(5*time.Millisecond), int64(250*time.Millisecond), 2.0, 0.5, 1000, 2, 512, 2, 0.0, false, int64(time.Second), int64(time.Second))
	f.Fuzz(func(t *testing.T, ttl int64, drift float64, masterTimeout int64, maxAttempts int, initial, maxInterval int64,
		mult, randomization float64, maxExt, coords, maxBatch, inFlight int, auto float64, qOff bool, qPeriod, qCheck int64) {
		opts := []api.Option{
			api.WithTTL(time.Duration(ttl)),
			api.WithDriftFactor(drift),
			api.WithMasterTimeout(time.Duration(masterTimeout)),
			api.WithRetry(api.Retry{MaxAttempts: maxAttempts, InitialInterval: time.Duration(initial), MaxInterval: time.Duration(maxInterval),
				Multiplier: mult, RandomizationFactor: randomization}),
			api.WithMaxExtensions(maxExt),
			api.WithCoordinators(coords),
			api.WithBatching(maxBatch, inFlight),
			api.WithAutoExtend(auto),
			api.WithFencing(qOff),
		}
		if qOff {
			opts = append(opts, api.WithoutRestartQuarantine())
		} else {
			opts = append(opts, api.WithRestartQuarantine(time.Duration(qPeriod)))
		}
		o := api.DefaultOptions()
		o.Quarantine.CheckInterval = time.Duration(qCheck)
		var err error
		for _, opt := range opts {
			if err = opt(&o); err != nil {
				break
			}
		}
		if err == nil {
			err = o.Validate()
		}
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
		case o.TTL-o.Drift() < time.Millisecond:
			t.Fatalf("validated TTL %v leaves %v after the drift allowance", o.TTL, o.TTL-o.Drift())
		case o.MasterTimeout <= 0 || o.MaxExtensions < 0 || o.Coordinators < 1 || o.Coordinators > 256 || o.MaxBatch < 1 || o.MaxInFlight < 1:
			t.Fatalf("validated engine settings %+v", o)
		case o.Retry.MaxAttempts < 0 || o.Retry.InitialInterval <= 0 || o.Retry.MaxInterval < o.Retry.InitialInterval ||
			!(o.Retry.Multiplier >= 1) || !(o.Retry.RandomizationFactor >= 0 && o.Retry.RandomizationFactor <= 1):
			t.Fatalf("validated retry %+v", o.Retry)
		case !(o.AutoExtend >= 0 && o.AutoExtend < 1):
			t.Fatalf("validated auto-extend %v", o.AutoExtend)
		case !o.Quarantine.Off && (o.Quarantine.Period < 0 || o.Quarantine.CheckInterval <= 0 || (o.Quarantine.Period > 0 && o.TTL > o.Quarantine.Period)):
			t.Fatalf("validated quarantine %+v with TTL %v", o.Quarantine, o.TTL)
		}
		again := o
		if err := again.Validate(); err != nil || again != o {
			t.Fatalf("validating again: %v, %+v -> %+v", err, o, again)
		}
	})
}

// FuzzCheckKeys checks CheckKey and CheckKeys against their definition on
// arbitrary keys (newline-separated for CheckKeys).
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{"", "k", "inventory:sku-42", "a\nb", "a\na", "a\n\nb", "\n", api.FencePrefix + "x",
		"x" + api.FencePrefix, strings.Repeat("k", api.MaxKeyLen), strings.Repeat("k", api.MaxKeyLen+1),
		strings.Repeat("k\n", api.MaxKeys), strings.Repeat("k\n", api.MaxKeys+1), "\x00\xff", "ключ\n鍵"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		valid := func(k string) bool {
			return len(k) >= 1 && len(k) <= api.MaxKeyLen && !strings.HasPrefix(k, api.FencePrefix)
		}
		check := func(what string, err error, want bool) {
			t.Helper()
			if (err == nil) != want {
				t.Fatalf("%s = %v, want valid=%v", what, err, want)
			}
			if err != nil && !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("%s = %v: does not wrap ErrInvalidArgument", what, err)
			}
		}
		check("CheckKey", api.CheckKey(s), valid(s))
		keys := strings.Split(s, "\n")
		want := len(keys) >= 1 && len(keys) <= api.MaxKeys
		seen := map[string]bool{}
		for _, k := range keys {
			if !valid(k) || seen[k] {
				want = false
			}
			seen[k] = true
		}
		check("CheckKeys", api.CheckKeys(keys), want)
	})
}
