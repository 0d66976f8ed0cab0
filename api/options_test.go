package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// TestOptionKinds: the per-lock options are LockOptions (and so Options:
// given to the engine they set its locks' default), the engine-wide ones
// are Options only, by their declared type and by the value they return, so
// that no type assertion turns an engine-wide option into a LockOption.
// What this buys is a compile-time error: neither of these compiles.
//
//	locker.Lock(ctx, "k", api.WithMasterTimeout(time.Second))
//	var _ api.LockOption = api.WithLogger(nil)
func TestOptionKinds(t *testing.T) {
	lockOpt, opt := reflect.TypeFor[api.LockOption](), reflect.TypeFor[api.Option]()
	for _, tc := range []struct {
		name    string
		fn      any
		value   api.Option
		perLock bool
	}{
		{"WithTTL", api.WithTTL, api.WithTTL(time.Second), true},
		{"WithDriftFactor", api.WithDriftFactor, api.WithDriftFactor(0.01), true},
		{"WithRetry", api.WithRetry, api.WithRetry(api.Retry{}), true},
		{"WithMaxAttempts", api.WithMaxAttempts, api.WithMaxAttempts(1), true},
		{"WithMaxExtensions", api.WithMaxExtensions, api.WithMaxExtensions(1), true},
		{"WithFencing", api.WithFencing, api.WithFencing(true), true},
		{"WithAutoExtend", api.WithAutoExtend, api.WithAutoExtend(0.5), true},
		{"WithMasterTimeout", api.WithMasterTimeout, api.WithMasterTimeout(time.Second), false},
		{"WithLogger", api.WithLogger, api.WithLogger(slog.Default()), false},
		{"WithCoordinators", api.WithCoordinators, api.WithCoordinators(1), false},
		{"WithBatching", api.WithBatching, api.WithBatching(1, 1), false},
		{"WithRestartQuarantine", api.WithRestartQuarantine, api.WithRestartQuarantine(time.Second), false},
		{"WithoutRestartQuarantine", api.WithoutRestartQuarantine, api.WithoutRestartQuarantine(), false},
	} {
		want := opt
		if tc.perLock {
			want = lockOpt
		}
		if got := reflect.TypeOf(tc.fn).Out(0); got != want {
			t.Errorf("%s returns %v, want %v", tc.name, got, want)
		}
		if _, ok := tc.value.(api.LockOption); ok != tc.perLock {
			t.Errorf("%s's value is a LockOption: %v, want %v", tc.name, ok, tc.perLock)
		}
	}
}

// Per-lock options override the engine's for one lock; engine-wide ones go
// to the constructor. Giving Lock an engine-wide option, such as
// api.WithMasterTimeout, is a compile-time error.
func ExampleLockOption() {
	locker, _ := engine.NewMemory(3, api.WithMasterTimeout(50*time.Millisecond), api.WithTTL(10*time.Second))
	defer locker.Close()
	ctx := context.Background()
	lock, _ := locker.Lock(ctx, "report", api.WithTTL(30*time.Second), api.WithMaxAttempts(3))
	fmt.Println(lock.TTL())
	_ = lock.Unlock(ctx)
	// Output: 30s
}

// TestDefaultCoordinators: one coordinator where the Go scheduler has one or
// two Ps, two above, read when the defaults are made; an engine built then
// runs with that many, and WithCoordinators still overrides it.
func TestDefaultCoordinators(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct{ procs, want int }{{1, 1}, {2, 1}, {3, 2}, {16, 2}} {
		runtime.GOMAXPROCS(tc.procs)
		if got := api.DefaultOptions().Coordinators; got != tc.want {
			t.Errorf("GOMAXPROCS %d: DefaultOptions().Coordinators = %d, want %d", tc.procs, got, tc.want)
		}
		e, err := engine.NewMemory(3)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Options().Coordinators; got != tc.want {
			t.Errorf("GOMAXPROCS %d: engine's Coordinators = %d, want %d", tc.procs, got, tc.want)
		}
		_ = e.Close()
		e, err = engine.NewMemory(3, api.WithCoordinators(3))
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Options().Coordinators; got != 3 {
			t.Errorf("GOMAXPROCS %d: WithCoordinators(3) gave %d", tc.procs, got)
		}
		_ = e.Close()
	}
}
