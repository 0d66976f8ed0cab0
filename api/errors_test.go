package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/api"
)

// A key up to the 1024-byte limit, or past it in the error that refuses it,
// is shown cut short, with its length: a log line should not carry a KiB
// of key, and the Key field still holds it whole. A multi-byte character is
// never cut in half.
func TestErrorShowsLongKeysCutShort(t *testing.T) {
	for _, tc := range []struct {
		name, key, want string
	}{
		{"short", "inventory:sku-42", `redlock: lock "inventory:sku-42": invalid argument`},
		{"at the bound", strings.Repeat("k", 128), `redlock: lock "` + strings.Repeat("k", 128) + `": invalid argument`},
		{"long", strings.Repeat("k", 1025), `redlock: lock "` + strings.Repeat("k", 64) + `…" (1025 bytes): invalid argument`},
		{"long, multi-byte", strings.Repeat("k", 63) + strings.Repeat("é", 100), `redlock: lock "` + strings.Repeat("k", 63) + `…" (263 bytes): invalid argument`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &api.Error{Op: "lock", Key: tc.key, Err: api.ErrInvalidArgument}
			got := err.Error()
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("Error() = %q\nwant it to start with %q", got, tc.want)
			}
			if err.Key != tc.key || !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("the error lost its key or its sentinel")
			}
		})
	}
}
