package waitroom

import (
	"context"
	"sync"
	"time"

	"github.com/flashline/flashline/salecache"
)

// Counting the pre-open crowd (see also the 000008 migration). Positions are
// leased in blocks and a dropped block leaves positions nobody holds, so the
// crowd a randomized_at_open room draws among is counted in tickets: each
// instance counts the pre-open tickets it gives out (once per customer, as
// far as it can tell: asking again on the same instance is not counted
// twice) and adds them to the room's count every countFlushDelay
// (RunCounts), or with its next lease. The freeze at the open takes the
// count.
const (
	// countFlushDelay is how long pre-open tickets wait to be counted in the
	// database: one UPDATE per instance and sale per delay, at most.
	countFlushDelay = 100 * time.Millisecond
	// countRetries bounds the retries of a count the database refused
	// (unreachable), one per flush. Tickets left uncounted share the ranks
	// of those counted: the order stays the draw's.
	countRetries = 5
	// maxSeen bounds the customers an instance remembers per sale to count
	// each once: beyond it, every pre-open ticket counts.
	maxSeen = 1 << 20
)

// lease is a block of positions [next, end) this instance may hand out for
// one sale, and the pre-open tickets it gave out and has not counted yet.
type lease struct {
	mu       sync.Mutex
	next     int64
	end      int64
	preOpen  bool // leased before the sale opened (by the database's clock)
	takenAt  time.Time
	lastUsed time.Time
	block    int64

	pending  int64               // pre-open tickets not yet counted in the database
	failures int                 // counts refused in a row
	seen     map[uint64]struct{} // customers (by draw) given a pre-open ticket here
}

// takePosition hands out the next position of this instance's lease for the
// sale, leasing a new block when the lease is used up, idle for LeaseIdle,
// older than LeaseMaxAge, or leased before an open this instance now sees.
// The block doubles when a lease was used up quickly and halves when most of
// one went unused, so that a busy sale costs one UPDATE per many tickets and
// a quiet one wastes few positions. A pre-open position is counted as one
// more in the pre-open crowd unless customer (the customer's draw) was
// counted here before.
func (r *Room) takePosition(ctx context.Context, s salecache.Sale, customer uint64) (position int64, preOpen bool, err error) {
	l := r.lease(s.ID)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := r.opts.Now()
	usable := l.next < l.end &&
		now.Sub(l.lastUsed) <= r.opts.LeaseIdle &&
		now.Sub(l.takenAt) <= r.opts.LeaseMaxAge &&
		!(l.preOpen && s.Opened(now))
	if !usable {
		switch {
		case l.end == 0:
		case l.next >= l.end && now.Sub(l.takenAt) < r.opts.LeaseIdle:
			l.block *= 2
		case l.end-l.next > l.block/2:
			l.block /= 2
		}
		l.block = min(max(l.block, 1), int64(r.opts.MaxBlock))
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		first, preOpen, err := r.store.LeasePositions(ctx, s.ID, l.block, l.pending)
		if err != nil {
			l.next, l.end = 0, 0
			return 0, false, err
		}
		l.pending = 0 // counted with the lease (or too late to count)
		l.next, l.end = first, first+l.block
		l.preOpen = preOpen
		l.takenAt = now
	}
	position = l.next
	l.next++
	l.lastUsed = now
	if l.preOpen {
		r.countLocked(l, customer)
	}
	return position, l.preOpen, nil
}

// countPreopen counts one pre-open ticket for customer (its draw) in saleID,
// once, for a ticket that took no position.
func (r *Room) countPreopen(saleID string, customer uint64) {
	l := r.lease(saleID)
	l.mu.Lock()
	defer l.mu.Unlock()
	r.countLocked(l, customer)
}

// lease is saleID's lease on this instance, made on first use.
func (r *Room) lease(saleID string) *lease {
	r.leaseMu.Lock()
	defer r.leaseMu.Unlock()
	l := r.leases[saleID]
	if l == nil {
		l = &lease{block: int64(r.opts.BlockSize)}
		r.leases[saleID] = l
	}
	return l
}

// countLocked counts one pre-open ticket for customer, once. l.mu is held.
func (r *Room) countLocked(l *lease, customer uint64) {
	if l.seen == nil {
		l.seen = map[uint64]struct{}{}
	}
	if _, ok := l.seen[customer]; ok {
		return
	}
	if len(l.seen) < maxSeen {
		l.seen[customer] = struct{}{}
	}
	l.pending++
}

// RunCounts adds every sale's pending pre-open tickets to the database's
// counts every countFlushDelay until ctx is done. Every instance that gives
// out tickets runs it (serve does, next to RunPacer).
func (r *Room) RunCounts(ctx context.Context) error {
	ticker := time.NewTicker(countFlushDelay)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		r.leaseMu.Lock()
		leases := make(map[string]*lease, len(r.leases))
		for id, l := range r.leases {
			leases[id] = l
		}
		r.leaseMu.Unlock()
		for id, l := range leases {
			r.flushCount(ctx, id, l)
		}
	}
}

// flushCount adds the pending pre-open tickets of l to the database's count.
// A count the database refuses is tried again at the next flush, up to
// countRetries times.
func (r *Room) flushCount(ctx context.Context, saleID string, l *lease) {
	l.mu.Lock()
	n := l.pending
	l.pending = 0
	l.mu.Unlock()
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := r.store.CountTickets(ctx, saleID, n)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.failures = 0
	case l.failures < countRetries && ctx.Err() == nil:
		l.failures++
		l.pending += n
		r.opts.Logger.WarnContext(ctx, "waitroom: count pre-open tickets", "sale_id", saleID, "tickets", n, "err", err)
	default:
		l.failures = 0
		r.opts.Logger.WarnContext(ctx, "waitroom: pre-open tickets left uncounted", "sale_id", saleID, "tickets", n, "err", err)
	}
}
