package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/api"
)

// The shop demo runs: buyers that read a product's stock, work a moment and
// write stock-1, without and with the lock.

// shop is one run of the workload: the inventory and what was sold.
type shop struct {
	o    demoOptions
	keys []string

	// The inventory is read and written with plain loads and stores:
	// atomics only so that the race detector does not flag the unlocked
	// run; a read-modify-write of them loses updates like any variable.
	stock    []atomic.Int64
	sold     []atomic.Int64
	inside   []atomic.Int32 // purchases of the product under way
	soldOut  []atomic.Bool
	open     atomic.Int64 // products not yet seen sold out
	overlaps atomic.Int64

	elapsed   time.Duration
	mu        sync.Mutex
	durations []time.Duration // lock cycles
	errs      errorCounts
}

func newShop(o demoOptions) *shop {
	s := &shop{
		o:       o,
		keys:    make([]string, o.Products),
		stock:   make([]atomic.Int64, o.Products),
		sold:    make([]atomic.Int64, o.Products),
		inside:  make([]atomic.Int32, o.Products),
		soldOut: make([]atomic.Bool, o.Products),
	}
	for p := range s.keys {
		s.keys[p] = fmt.Sprintf("stock:%d", p+1)
		s.stock[p].Store(int64(o.Stock))
	}
	s.open.Store(int64(o.Products))
	return s
}

// run lets the buyers loose until everything is sold out or ctx ends; l nil
// runs without the lock.
func (s *shop) run(ctx context.Context, l api.Locker) {
	start := time.Now()
	var wg sync.WaitGroup
	for b := range s.o.Buyers {
		wg.Go(func() { s.buyer(ctx, l, b) })
	}
	wg.Wait()
	s.elapsed = time.Since(start)
}

func (s *shop) buyer(ctx context.Context, l api.Locker, b int) {
	var (
		durations []time.Duration
		errs      errorCounts
	)
	next := b % s.o.Products
	for ctx.Err() == nil {
		p := s.pick(&next)
		if p < 0 {
			break
		}
		if l == nil {
			s.purchase(p)
			continue
		}
		t0 := time.Now()
		if s.lockedPurchase(ctx, l, p, &errs) {
			durations = append(durations, time.Since(t0))
		}
	}
	if l != nil {
		s.mu.Lock()
		s.durations = append(s.durations, durations...)
		s.errs.add(errs)
		s.mu.Unlock()
	}
}

// pick chooses a product that is not known to be sold out, or -1 when all
// are.
func (s *shop) pick(next *int) int {
	n := s.o.Products
	if s.open.Load() == 0 {
		return -1
	}
	start := *next
	if s.o.Pick == "random" {
		start = rand.IntN(n)
	}
	for i := range n {
		p := (start + i) % n
		if !s.soldOut[p].Load() {
			*next = (p + 1) % n
			return p
		}
	}
	return -1
}

// purchase buys one item of product p: read the stock, work, write stock-1.
func (s *shop) purchase(p int) {
	if s.inside[p].Add(1) > 1 {
		s.overlaps.Add(1)
	}
	defer s.inside[p].Add(-1)
	n := s.stock[p].Load()
	if n <= 0 {
		if s.soldOut[p].CompareAndSwap(false, true) {
			s.open.Add(-1)
		}
		return
	}
	if s.o.Work > 0 {
		time.Sleep(s.o.Work)
	} else {
		runtime.Gosched()
	}
	s.stock[p].Store(n - 1)
	s.sold[p].Add(1)
}

// lockedPurchase runs purchase between Lock and Unlock. It reports whether
// a whole lock cycle ran; a failed Lock is counted in errs and the buyer
// tries again.
func (s *shop) lockedPurchase(ctx context.Context, l api.Locker, p int, errs *errorCounts) bool {
	lctx, cancel := context.WithTimeout(ctx, s.o.LockTimeout)
	lk, err := l.Lock(lctx, s.keys[p])
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			errs.count(err)
		}
		return false
	}
	// Act only while the lock is valid: past Until it may be someone else's.
	if time.Now().Before(lk.Until()) {
		s.purchase(p)
	} else {
		errs.count(fmt.Errorf("lock %q: validity passed before the purchase began; purchase skipped", s.keys[p]))
	}
	// Release even when the demo is being interrupted, so that the masters
	// do not keep the lock until its TTL runs out.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for try := 1; ; try++ {
		err = lk.Unlock(uctx)
		if err == nil {
			return true
		}
		errs.count(err)
		// "Unreachable" may mean the release did not land; it is safe to
		// call Unlock again. Anything else is final.
		if !errors.Is(err, api.ErrQuorumUnreachable) || try == 3 || uctx.Err() != nil {
			return false
		}
	}
}
