package waitroom

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/flashline/flashline"
)

// Counting the pre-open crowd (see also the 000008 migration): a
// randomized_at_open room estimates its pre-open crowd in tickets before
// the open, and draws among the holders the freeze commits (their number
// is N: postgres's WaitroomCommitCrowd, issue 48). Each instance counts
// the pre-open tickets it gives out (once per customer, as far as it can
// tell: asking again on the same instance is not counted twice) and adds
// them to the room's count every countFlushDelay
// (RunCounts), or with its next lease; an edge reports its totals to every
// origin instead (package edge). The freeze at the open fixes the count.
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

// Positions order the tickets placed by arrival. They are leased from the
// room's row (one UPDATE per lease), and a lease takes exactly as many as
// are waiting for one: the first ticket of a sale to need a position waits
// GatherWindow, gathering those that arrive meanwhile, and one lease serves
// them all, in their order of arrival (at most MaxBlock positions; the
// others wait for the next). An origin gathers its edges' leases (POST
// /edge/lease, one per edge and window) with its own tickets the same way.
// So no position is leased that nobody holds (but for a lease whose answer
// is lost, or a ticket whose client left while it waited) and a place counts
// the people ahead, while the room's row takes one UPDATE per instance and
// GatherWindow however fast people arrive, whatever the number of edges.

// lease is one instance's state for one sale: what waits for positions, and
// the pre-open tickets it gave out and has not counted yet.
type lease struct {
	mu      sync.Mutex
	waiters []*waiter // in order of arrival
	leading bool      // a gatherer is leasing for them

	pending  int64               // pre-open tickets not yet counted in the database
	failures int                 // counts refused in a row
	seen     map[uint64]struct{} // customers (by draw) given a pre-open ticket here
	// holders are the customers given a pre-open ticket here and not yet
	// written to the room's holders (randomized_at_open only), written
	// with the count, in one statement per flush (flushHolders).
	holders        []string
	holderFailures int
}

// waiter is a ticket waiting for its position (n = 1), or an edge's lease
// waiting for its n.
type waiter struct {
	n        int64
	ticket   bool   // a ticket of this instance: counted if pre-open
	customer uint64 // its customer's draw, to count a pre-open ticket once
	holder   string // its customer, a holder if pre-open ("": not recorded)
	done     chan struct{}
	first    int64
	preOpen  bool
	err      error
}

// takePosition hands out the next position of the sale's room for one
// ticket (see positions). A pre-open position is counted as one more in
// the pre-open crowd unless customer (the customer's draw) was counted here
// before.
func (r *Room) takePosition(ctx context.Context, s flashline.SaleFacts, customerID string, customer uint64) (position int64, preOpen bool, err error) {
	w := &waiter{n: 1, ticket: true, customer: customer}
	if s.Room.Fairness == flashline.FairnessRandomizedAtOpen {
		w.holder = customerID
	}
	return r.takePositions(ctx, s.ID, w)
}

// takePositions waits for w's positions, leased with whatever else waits
// for some in saleID's room in the same GatherWindow.
func (r *Room) takePositions(ctx context.Context, saleID string, w *waiter) (first int64, preOpen bool, err error) {
	w.done = make(chan struct{})
	l := r.lease(saleID)
	l.mu.Lock()
	l.waiters = append(l.waiters, w)
	lead := !l.leading
	l.leading = true
	l.mu.Unlock()
	if lead {
		go r.gather(saleID, l)
	}
	select {
	case <-w.done:
		return w.first, w.preOpen, w.err
	case <-ctx.Done():
		return 0, false, ctx.Err() // the positions leased for it, if any, stay unheld
	}
}

// gather leases positions for l's waiters, a window's arrivals per lease,
// until none is left.
func (r *Room) gather(saleID string, l *lease) {
	for {
		time.Sleep(r.opts.GatherWindow)
		l.mu.Lock()
		k, n := 0, int64(0)
		for k < len(l.waiters) && (k == 0 || n+l.waiters[k].n <= int64(r.opts.MaxBlock)) {
			n += l.waiters[k].n
			k++
		}
		if k == 0 {
			l.waiters = nil
			l.leading = false
			l.mu.Unlock()
			return
		}
		batch := l.waiters[:k:k]
		l.waiters = l.waiters[k:]
		pending := l.pending
		l.pending = 0
		l.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		first, preOpen, err := r.store.LeasePositions(ctx, saleID, n, pending)
		cancel()
		l.mu.Lock()
		if err == nil {
			r.metrics.leases.Inc()
			r.metrics.leased.Add(float64(n))
		}
		switch {
		case err != nil:
			l.pending += pending // counted with the next lease or flush
		case preOpen:
			for _, w := range batch {
				if w.ticket {
					r.countLocked(l, w.customer, w.holder)
				}
			}
		}
		l.mu.Unlock()
		for _, w := range batch {
			w.first, w.preOpen, w.err = first, preOpen, err
			first += w.n
			close(w.done)
		}
	}
}

// countPreopen counts one pre-open ticket for customer (its draw) in saleID,
// once, for a ticket that took no position, and records customerID among
// the holders; it reports whether the ticket was the first.
func (r *Room) countPreopen(saleID, customerID string, customer uint64) bool {
	l := r.lease(saleID)
	l.mu.Lock()
	defer l.mu.Unlock()
	return r.countLocked(l, customer, customerID)
}

// lease is saleID's lease on this instance, made on first use.
func (r *Room) lease(saleID string) *lease {
	r.leaseMu.Lock()
	defer r.leaseMu.Unlock()
	l := r.leases[saleID]
	if l == nil {
		l = &lease{}
		r.leases[saleID] = l
	}
	return l
}

// countLocked counts one pre-open ticket for customer, once, and records
// holder ("": none) with it, and reports whether it was the first. l.mu is held.
func (r *Room) countLocked(l *lease, customer uint64, holder string) bool {
	if l.seen == nil {
		l.seen = map[uint64]struct{}{}
	}
	if _, ok := l.seen[customer]; ok {
		return false
	}
	if holder != "" {
		// A copy: the edge's front door passes a view of its scratch
		// space (TicketFromMemory), which the next request reuses.
		l.holders = append(l.holders, strings.Clone(holder))
	}
	if len(l.seen) < maxSeen {
		l.seen[customer] = struct{}{}
	}
	l.pending++
	return true
}

// RunCounts adds every sale's pending pre-open tickets to the database's
// counts every countFlushDelay until ctx is done, and, on an origin, the
// edges' at the open (flushEdges). Every instance runs it (serve does, next
// to RunPacer; an edge too).
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
			r.flushHolders(ctx, id, l)
		}
		r.flushEdges(ctx)
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
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := r.store.CountTickets(wctx, saleID, n)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if retry(ctx, err, &l.failures) {
		l.pending += n
		r.opts.Logger.WarnContext(ctx, "waitroom: count pre-open tickets", "sale_id", saleID, "tickets", n, "err", err)
	} else if err != nil {
		r.opts.Logger.WarnContext(ctx, "waitroom: pre-open tickets left uncounted", "sale_id", saleID, "tickets", n, "err", err)
	}
}

// retry says whether a flush's write that ended with err is tried again at
// the next flush: refused (err not nil) fewer than countRetries times in a
// row (*failures, kept here) while the flushes go on (ctx not done).
func retry(ctx context.Context, err error, failures *int) bool {
	if err == nil || *failures >= countRetries || ctx.Err() != nil {
		*failures = 0
		return false
	}
	*failures++
	return true
}

// flushHolders writes the holders of l not yet written to the room's, in
// one statement. A write the database refuses is tried again at the next
// flush, up to countRetries times; one refused because the crowd is
// committed is dropped (those customers are not in the committed crowd, and
// the log says how many).
func (r *Room) flushHolders(ctx context.Context, saleID string, l *lease) {
	l.mu.Lock()
	holders := l.holders
	l.holders = nil
	l.mu.Unlock()
	if len(holders) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := r.store.AddHolders(wctx, saleID, holders)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, flashline.ErrCrowdCommitted) {
		l.holderFailures = countRetries // never tried again: the crowd is committed
	}
	if retry(ctx, err, &l.holderFailures) {
		l.holders = append(holders, l.holders...)
		r.opts.Logger.WarnContext(ctx, "waitroom: record pre-open holders", "sale_id", saleID, "holders", len(holders), "err", err)
	} else if err != nil {
		r.opts.Logger.WarnContext(ctx, "waitroom: pre-open holders left out of the committed crowd", "sale_id", saleID, "holders", len(holders), "err", err)
	}
}
