package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
)

// An auto-extended lock that used up MaxExtensions (83 minutes with the
// defaults: a long job meets it) expires like one lost to a dead network;
// its Err must say that the limit ran out, and which option raises it
// (review newuser, 2026-11-29).
func TestMaxExtensionsUsedUpIsNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMemory(t, 5)
		l, err := e.Lock(context.Background(), "long-job",
			api.WithTTL(100*time.Millisecond), api.WithAutoExtend(0.5), api.WithMaxExtensions(2))
		if err != nil {
			t.Fatal(err)
		}
		<-l.Done()
		if err := l.Err(); !errors.Is(err, api.ErrExpired) || !strings.Contains(err.Error(), "WithMaxExtensions") {
			t.Fatalf("an auto-extended lock whose 2 extensions ran out ended with Err = %v, want ErrExpired naming WithMaxExtensions", err)
		}
	})
}
