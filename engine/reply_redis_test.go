package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/internal/redistest"
)

// Masters that answer an acquire at once with an error reply (full under
// maxmemory with noeviction: OOM; a user whose ACL lacks SET: NOPERM)
// answered: a failed Lock's headline must say that they refused the command
// with an error, not that too few answered in time, which sends the reader
// after a network problem. The sentinel stays ErrQuorumUnreachable (no
// majority decided, and a retry may succeed once the masters are fixed),
// and each master's answer still carries its own reply.
func TestRedisErrorRepliesHeadline(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, s *redistest.Server)
		reply  string
	}{
		{"oom", func(t *testing.T, s *redistest.Server) {
			s.Do(t, nil, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			s.Do(t, nil, "CONFIG", "SET", "maxmemory", "1")
		}, "OOM"},
		{"noperm", func(t *testing.T, s *redistest.Server) {
			// The engine's connections are the default user's: an ACL
			// change applies to them at once.
			s.Do(t, nil, "ACL", "SETUSER", "default", "-set", "-@scripting")
		}, "NOPERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			servers := redistest.Start(t, 3)
			e := redisEngine(t, servers)
			for _, s := range servers {
				c.break_(t, s)
			}
			ctx := context.Background()
			once := api.WithRetry(api.Retry{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, Multiplier: 1})
			for _, try := range []struct {
				name string
				do   func() (api.Lock, error)
			}{
				{"TryLock", func() (api.Lock, error) { return e.TryLock(ctx, "k") }},
				{"Lock", func() (api.Lock, error) { return e.Lock(ctx, "k", once) }},
				{"TryLockAll", func() (api.Lock, error) { return e.TryLockAll(ctx, []string{"k1", "k2"}) }},
			} {
				l, err := try.do()
				if err == nil {
					_ = l.Unlock(ctx)
					t.Fatalf("%s granted by masters that refuse every write", try.name)
				}
				checkReplyHeadline(t, try.name, err, c.reply)
			}
		})
	}
}

// checkReplyHeadline checks a failure of masters that answered with error
// replies: still ErrQuorumUnreachable, a headline (what precedes the
// masters' answers) that says they answered with an error, and every failed
// master's own reply.
func checkReplyHeadline(t *testing.T, what string, err error, reply string) {
	t.Helper()
	if !errors.Is(err, api.ErrQuorumUnreachable) || errors.Is(err, api.ErrNotAcquired) {
		t.Errorf("%s: %v\nwant ErrQuorumUnreachable (and not ErrNotAcquired)", what, err)
	}
	msg := err.Error()
	headline, _, _ := strings.Cut(msg, "; masters: ")
	if strings.Contains(headline, "answered in time") || !strings.Contains(headline, "answered with an error") {
		t.Errorf("%s: the headline %q\nof %s\nblames masters that did not answer in time; want it to say they answered with an error", what, headline, msg)
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s: %v is not an *api.Error", what, err)
	}
	failed := 0
	for _, m := range ae.Masters {
		if m.Answer != api.Failed {
			continue
		}
		failed++
		if m.Err == nil || !strings.Contains(m.Err.Error(), reply) || !errors.Is(m.Err, api.ErrErrorReply) {
			t.Errorf("%s: master %s failed with %v; want its %s reply, an api.ErrErrorReply", what, m.Master, m.Err, reply)
		}
	}
	if failed < 2 {
		t.Errorf("%s: %d masters failed, want at least 2 (a majority) in %v", what, failed, err)
	}
}
