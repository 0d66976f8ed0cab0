package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/api"
)

// The read-write locks and the semaphores are observed as Lock is: a span
// per call, redlock.lock.acquire.duration and .attempts under their own
// redlock.call, and their holds in redlock.lock.held and .lost (review
// observe, 2026-11-29: they had attempts recorded as call=lock and nothing
// else).
func TestReadWriteAndSemaphoreAreObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry(t)
		e := newMemory(t, 3, tm.opts...)
		ctx := context.Background()
		r, err := e.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Unlock(ctx)
		w, err := e.WLock(ctx, "rw", api.WithTTL(30*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Semaphore(ctx, "sem", 2, api.WithTTL(30*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ms := tm.collect(t)
		wantValue(t, ms, 2, "redlock.lock.held") // the write lock and the permit
		for _, call := range []string{"rlock", "wlock", "semaphore"} {
			if _, n := sel(ms, "redlock.lock.acquire.duration", "redlock.call="+call); n != 1 {
				t.Errorf("redlock.lock.acquire.duration{redlock.call=%s}: %d records, want 1", call, n)
			}
		}
		for _, call := range []string{"rlock", "wlock"} {
			if _, n := sel(ms, "redlock.lock.acquire.attempts", "redlock.call="+call); n != 1 {
				t.Errorf("redlock.lock.acquire.attempts{redlock.call=%s}: %d records, want 1", call, n)
			}
		}
		if _, n := sel(ms, "redlock.lock.acquire.attempts", "redlock.call=lock"); n != 0 {
			t.Errorf("redlock.lock.acquire.attempts{redlock.call=lock}: %d records with no Lock called", n)
		}
		<-w.Done()
		<-s.Done()
		ms = tm.collect(t)
		wantValue(t, ms, 0, "redlock.lock.held")
		wantValue(t, ms, 2, "redlock.lock.lost", "redlock.cause=expired")
		names := map[string]bool{}
		for _, sp := range tm.spans.GetSpans() {
			names[sp.Name] = true
		}
		for _, n := range []string{"redlock.RLock", "redlock.WLock", "redlock.Semaphore"} {
			if !names[n] {
				t.Errorf("no %s span; spans: %v", n, names)
			}
		}
	})
}
