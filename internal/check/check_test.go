package check_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/check"
)

// TestEngineDefaults: no options give DefaultOptions with the quarantine
// period set to the TTL; a lock with no options of its own gets the
// engine's; a nil option is skipped; a TTL is rounded up to whole ms.
func TestEngineDefaults(t *testing.T) {
	o, err := check.Engine([]api.Option{nil, api.WithTTL(1500*time.Millisecond - 999*time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	want := api.DefaultOptions()
	want.TTL = 1500 * time.Millisecond
	want.Quarantine.Period = want.TTL
	if o != want {
		t.Fatalf("got %+v, want %+v", o, want)
	}
	if l, err := check.Lock(o, []api.LockOption{nil}); err != nil || l != o {
		t.Fatalf("lock with a nil option: %v, %+v", err, l)
	}
}

// TestWhole: the rules no single option can check, each with the hint that
// says what to fix, for the engine and for one lock of it.
func TestWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine []api.Option
		lock   []api.LockOption
		hint   string
	}{
		{"ttl too short for drift", []api.Option{api.WithTTL(2 * time.Millisecond)}, nil, "use a ttl of at least 4ms"},
		{"drift raised over a short ttl", []api.Option{api.WithTTL(5 * time.Millisecond)}, []api.LockOption{api.WithDriftFactor(0.49)}, "use a ttl of at least 6ms"},
		{"ttl over the quarantine", []api.Option{api.WithRestartQuarantine(time.Second), api.WithTTL(2 * time.Second)}, nil, "raise the quarantine with WithRestartQuarantine"},
		{"lock ttl over the default quarantine", nil, []api.LockOption{api.WithTTL(11 * time.Second)}, "longer than the restart quarantine 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := check.Engine(tc.engine)
			if tc.lock != nil {
				if err != nil {
					t.Fatalf("engine options: %v", err)
				}
				_, err = check.Lock(o, tc.lock)
			}
			if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("got %v; want an invalid-argument error saying %q", err, tc.hint)
			}
		})
	}
}
