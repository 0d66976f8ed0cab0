package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
)

// probePrefix starts the keys probe locks.
const probePrefix = "redlock-demo:probe:"

// probe takes and releases one lock before the load starts (demo, bench),
// so that masters that are down are a setup error instead of lockers
// waiting forever. It tries for 3s, longer while masters answer that they
// are in restart quarantine: they do that for a moment after every
// (re)connect until the engine has checked them, and for the quarantine
// period after they restarted; the latter is announced on log.
func probe(ctx context.Context, eng lockEngine, log io.Writer) error {
	announced := false
	extend := func(err error, waited time.Duration) time.Duration {
		q := eng.Options().Quarantine
		n := answersOf(err).quarantined
		if q.Off || n == 0 {
			return 0
		}
		// A master that restarted before we started votes again within
		// the period (uptime is read in whole seconds).
		limit := q.Period + 3*time.Second
		if !announced && waited > time.Second {
			announced = true
			fmt.Fprintf(log, "redlock demo: waiting up to %v for %d of %d masters to end their restart quarantine: a master that restarted may have lost locks, so it does not vote until they expired\n",
				(limit - waited).Round(time.Second), n, len(eng.Masters()))
		}
		return limit
	}
	return bench.WaitReady(ctx, bench.Engine(eng), probePrefix, 3*time.Second, extend)
}

// answers counts, among the masters that answered err's last attempt
// without voting, those in restart quarantine, those that answered with an
// error reply (api.ErrErrorReply: OOM, NOPERM...) and those kept from
// voting as unsafe for locks (api.ErrUnsafeMaster: a replica, an evicting
// master, INFO refused); and those that had not answered when it ended (an
// attempt ends once a quorum is out of reach, so they may be any of these).
type answers struct{ quarantined, replies, unsafe, unheard int }

func answersOf(err error) (a answers) {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return a
	}
	for _, m := range ae.Masters {
		switch {
		case errors.Is(m.Err, api.ErrQuarantined):
			a.quarantined++
		case errors.Is(m.Err, api.ErrErrorReply):
			a.replies++
		case errors.Is(m.Err, api.ErrUnsafeMaster):
			a.unsafe++
		case m.Answer == api.NoAnswer:
			a.unheard++
		}
	}
	return a
}
