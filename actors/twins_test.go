package actors

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/quorumlock/redlock/api"
)

type countHandler struct {
	mu sync.Mutex
	n  int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// The verdicts follow the run ids as they change: a pair, a third member,
// one leaving (unknown), and the last pair breaking up. Each new pair is
// logged once.
func TestTwinsFollowRunIDs(t *testing.T) {
	h := &countHandler{}
	tw := newTwins([]string{"a", "b", "c"}, slog.New(h))
	check := func(step string, want ...string) {
		t.Helper()
		for i, w := range want {
			err := tw.err(i)
			switch {
			case w == "" && err != nil:
				t.Fatalf("%s: node %d barred: %v", step, i, err)
			case w != "" && (!errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(fmtErr(err), w)):
				t.Fatalf("%s: node %d: %v; want an ErrInvalidArgument saying %q", step, i, err, w)
			}
		}
	}
	tw.set(0, "r1")
	tw.set(2, "r2")
	check("distinct", "", "", "")
	tw.set(1, "r1")
	check("a and b", `masters 1 ("a") and 2 ("b") are one server (run_id r1)`, `masters 1 ("a") and 2 ("b")`, "")
	tw.set(1, "r1") // read again: nothing new to say
	tw.set(2, "r1")
	check("all three", "masters 1", "masters 1", `masters 1 ("a") and 3 ("c")`)
	tw.set(0, "") // a cannot be read: it does not vote anyway
	check("a unknown", "", `masters 2 ("b") and 3 ("c")`, "masters 2")
	tw.set(2, "r3")
	check("apart", "", "", "")
	if h.n != 2 {
		t.Fatalf("%d log lines; want 2 (b joining a, c joining them)", h.n)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
