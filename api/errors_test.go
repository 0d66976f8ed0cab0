package api_test

import (
	"context"
	"errors"
	"fmt"
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

// replyErr is a master's error reply as the engine puts it in a
// MasterAnswer: its text, with api.ErrErrorReply in its chain.
type replyErr string

func (e replyErr) Error() string        { return string(e) }
func (e replyErr) Is(target error) bool { return target == api.ErrErrorReply }

// An ErrQuorumUnreachable that masters' error replies caused says so in its
// headline, for the error itself and for a cancelled call's last attempt;
// one that masters that did not answer caused (whatever the replies) keeps
// "too few masters answered in time"; one whose majority granted too late
// says that instead: the masters answered.
// errors.Is is the same either way: the top-level error never wraps
// ErrErrorReply.
func TestQuorumUnreachableHeadlineNamesErrorReplies(t *testing.T) {
	oom := replyErr(`redis m: acquire "k": OOM command not allowed when used memory > 'maxmemory'.`)
	timeout := errors.New("redis m: no answer: context deadline exceeded")
	reply := api.MasterAnswer{Master: "m", Answer: api.Failed, Err: oom}
	down := api.MasterAnswer{Master: "m", Answer: api.Failed, Err: timeout}
	pending := api.MasterAnswer{Master: "m"}
	granted := api.MasterAnswer{Master: "m", Answer: api.Granted}
	refused := api.MasterAnswer{Master: "m", Answer: api.Refused}
	const stock = "quorum unreachable: too few masters answered in time"
	for _, tc := range []struct {
		name    string
		err     *api.Error
		want    string
		notWant string
	}{
		{"replies", &api.Error{Op: "trylock", Key: "k", Err: api.ErrQuorumUnreachable, Masters: []api.MasterAnswer{reply, pending, reply}},
			`redlock: trylock "k": quorum unreachable: 2 of 3 masters answered with an error reply, not a grant or a refusal`, stock},
		{"replies and a timeout", &api.Error{Op: "lock", Key: "k", Err: api.ErrQuorumUnreachable, Masters: []api.MasterAnswer{reply, reply, down, refused, refused}},
			`quorum unreachable: 2 of 5 masters answered with an error reply, not a grant or a refusal, and 1 more failed`, stock},
		{"cancelled", &api.Error{Op: "lock", Key: "k", Err: context.DeadlineExceeded, Last: api.ErrQuorumUnreachable, Masters: []api.MasterAnswer{reply, reply, pending}},
			`redlock: lock "k": context deadline exceeded (last attempt: quorum unreachable: 2 of 3 masters answered with an error reply`, stock},
		{"timeouts decide", &api.Error{Op: "lock", Key: "k", Err: api.ErrQuorumUnreachable, Masters: []api.MasterAnswer{reply, down, down, down, refused}},
			stock, "error reply,"},
		{"granted too late", &api.Error{Op: "lock", Key: "k", Err: api.ErrQuorumUnreachable, Masters: []api.MasterAnswer{granted, granted, reply}},
			`redlock: lock "k": quorum unreachable: 2 of 3 masters granted, but too late: `, stock},
		{"granted too late, cancelled", &api.Error{Op: "lock", Key: "k", Err: context.Canceled, Last: api.ErrQuorumUnreachable, Masters: []api.MasterAnswer{granted, reply, granted}},
			`(last attempt: quorum unreachable: 2 of 3 masters granted, but too late: `, stock},
		{"taken", &api.Error{Op: "lock", Key: "k", Err: api.ErrNotAcquired, Masters: []api.MasterAnswer{refused, refused, reply}},
			"not acquired", "error reply,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.err.Error()
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
				t.Errorf("Error() = %q\nwant it to contain %q and not %q", got, tc.want, tc.notWant)
			}
			if !strings.Contains(got, string(oom)) {
				t.Errorf("Error() = %q\nlost the master's own reply", got)
			}
			if errors.Is(tc.err, api.ErrErrorReply) {
				t.Errorf("errors.Is(%q, ErrErrorReply): a top-level error must not wrap it", got)
			}
		})
	}
}

// Masters kept from voting (restart quarantine, unsafe for locks) answered
// too: an ErrQuorumUnreachable they caused says so in its headline, not
// "too few masters answered in time", alone or beside error replies.
func TestQuorumUnreachableHeadlineNamesMastersThatMayNotVote(t *testing.T) {
	quar := api.MasterAnswer{Master: "m", Answer: api.Failed, Err: fmt.Errorf("%w: restarted 2s ago", api.ErrQuarantined)}
	unsafe := api.MasterAnswer{Master: "m", Answer: api.Failed, Err: fmt.Errorf("%w: it is a replica", api.ErrUnsafeMaster)}
	reply := api.MasterAnswer{Master: "m", Answer: api.Failed, Err: replyErr(`OOM command not allowed`)}
	down := api.MasterAnswer{Master: "m", Answer: api.Failed, Err: errors.New("no answer")}
	pending := api.MasterAnswer{Master: "m"}
	const stock = "too few masters answered in time"
	for _, tc := range []struct {
		name    string
		masters []api.MasterAnswer
		want    string
	}{
		{"kept", []api.MasterAnswer{quar, unsafe, pending},
			`quorum unreachable: 2 of 3 masters answered but may not vote (in restart quarantine, or unsafe for locks: see each master's answer)`},
		{"kept and replies", []api.MasterAnswer{reply, quar, pending},
			`quorum unreachable: 1 of 3 masters answered with an error reply and 1 may not vote (in restart quarantine, or unsafe for locks) (see each master's answer)`},
		{"kept and a timeout", []api.MasterAnswer{unsafe, unsafe, down, pending, pending},
			`quorum unreachable: 2 of 5 masters answered but may not vote (in restart quarantine, or unsafe for locks: see each master's answer), and 1 more failed`},
		{"timeouts decide", []api.MasterAnswer{quar, down, down, down, pending}, stock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &api.Error{Op: "trylock", Key: "k", Err: api.ErrQuorumUnreachable, Masters: tc.masters}
			if got := err.Error(); !strings.Contains(got, tc.want) || (tc.want != stock && strings.Contains(got, stock)) {
				t.Errorf("Error() = %q\nwant it to contain %q", got, tc.want)
			}
		})
	}
}
