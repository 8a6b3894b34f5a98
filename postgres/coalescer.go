package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flashline/flashline"
)

// The coalescer gathers concurrent reservations for one sale on this
// instance into batches, and runs each batch as one transaction that takes
// the stock of the whole batch with one conditional decrement. One hot stock
// row then costs one lock, one commit and one fsync per batch instead of per
// reservation.
//
// It is group commit: a request that finds no batch of its sale running
// starts one at once, alone, so an uncontended request waits for nothing.
// Requests arriving while batches are running queue up, and the next batch
// takes up to MaxBatch of them in arrival order. The window is therefore the
// time a batch takes, no timer involved, and it only exists under contention.
//
// Each caller gets the answer it would have had alone. Decisions that depend
// on one request (replay, idempotency key reused, sale not open, limit
// reached, admission refused) are taken per request from one read; the stock
// is allocated in arrival order; a customer appears at most once per batch
// (a second request of the same customer, or of the same payment
// instrument, waits for the next batch, where it sees the first one's
// outcome); and a batch that fails as a whole is run
// again one request at a time, so that one bad request fails alone.

// maxAttempts bounds how often one request is carried over to a later batch
// (its customer was busy in another transaction, or its bucket ran short
// while another bucket still had stock).
const maxAttempts = flashline.MaxBuckets + 4

type call struct {
	req flashline.ReserveRequest
	// client is the caller's context: the call does not run under it, but
	// is dropped if it is done before the call's batch begins.
	client   context.Context
	deadline time.Time
	attempts int
	// round is how many batches of the sale had started when the call
	// joined the queue.
	round uint64
	done  chan struct{}
	res   flashline.ReserveResult
	err   error
}

func (c *call) finish(res flashline.ReserveResult, err error) {
	c.res, c.err = res, err
	close(c.done)
}

// saleQueue holds the requests waiting for a batch of one sale.
type saleQueue struct {
	waiting []*call
	running int
	started uint64 // batches started
	bound   queueBound
	// batchTime is how long the sale's batches take now (a moving
	// average): a call with less than twice that left is not put in one.
	batchTime time.Duration
	// busy counts the running batches of the sale that hold each bucket:
	// with several batches in flight (Options.BatchesInFlight) and several
	// buckets, each batch takes a bucket no other holds, so that they run
	// side by side, their commits sharing an fsync, instead of queueing
	// for one row lock.
	busy map[int32]int
}

// queueBound is how many rounds of batches a sale's queue may hold: a
// request that would wait longer is refused at once (ErrOverloaded). It
// tells a standing queue from a burst as CoDel does (see loadshed), but in
// rounds of batches rather than time, since a batch's time grows with its
// size by design. A request that joins the next batch to start waited 0
// rounds; one that joins a later batch waited 1 or more, because a whole
// batch ahead of it was still waiting. When even the fewest rounds any
// request waited over a whole interval is 1 or more, the queue never drained
// to less than a batch: it stands, and the bound is halved (down to one
// round); every interval in which it did drain, the bound grows by a round,
// back up to Options.QueueRounds. A burst, or a hiccup of the database, is
// absorbed by the whole allowance and served once it passes; a steady
// overload settles at one or two rounds: about two batch times of waiting.
type queueBound struct {
	rounds    int
	start     time.Time // of the current interval
	minWaited uint64    // over the current interval
	samples   int
}

// boundInterval is the span over which a sale's queue must have stood.
const boundInterval = 100 * time.Millisecond

func (b *queueBound) observe(waited uint64) {
	if b.samples == 0 || waited < b.minWaited {
		b.minWaited = waited
	}
	b.samples++
}

// tick closes the interval if it is over and moves the bound, which stays
// within [1, most].
func (b *queueBound) tick(now time.Time, most int) {
	if now.Sub(b.start) < boundInterval {
		return
	}
	switch {
	case b.samples > 0 && b.minWaited >= 1:
		b.rounds /= 2
	case b.samples > 0:
		b.rounds++
	}
	b.rounds = min(most, max(1, b.rounds))
	b.start, b.samples = now, 0
}

type coalescer struct {
	store *Store
	mu    sync.Mutex
	sales map[string]*saleQueue
}

// submit queues c and returns its answer, which is definite: a batch runs
// under the earliest deadline of its calls (reserveBatch), so it has ended,
// committed or rolled back, by c's deadline, plus at most its COMMIT's time,
// and an ErrOverloaded means nothing was written. A sale whose queue is full
// refuses c at once with ErrOverloaded (see full): c would wait for more
// rounds of batches than the bound allows, and more waiting would add
// latency without selling one unit more (the batches are full already).
func (co *coalescer) submit(c *call) (flashline.ReserveResult, error) {
	key := c.req.SaleID
	co.mu.Lock()
	q := co.sales[key]
	if q == nil {
		q = &saleQueue{bound: queueBound{rounds: co.store.opts.QueueRounds, start: time.Now()}}
		co.sales[key] = q
	}
	if co.fullLocked(q) {
		co.mu.Unlock()
		if co.store.opts.OnQueueFull != nil {
			co.store.opts.OnQueueFull()
		}
		return flashline.ReserveResult{}, fmt.Errorf("reserve sale %s: its batches are full: %w", c.req.SaleID, flashline.ErrOverloaded)
	}
	c.round = q.started
	q.waiting = append(q.waiting, c)
	batch := co.take(key, q)
	co.mu.Unlock()
	if batch != nil {
		go co.run(key, batch)
	}
	<-c.done
	return c.res, c.err
}

// A sale has one queue, whatever its variants: a batch takes the stock of
// one variant (ReserveBatchBegin reads that variant's buckets), the variant
// of the oldest request waiting (take), so each variant's reservations are
// coalesced on their own, while the sale's batches in flight
// (BatchesInFlight), its queue's bound (full) and the instance's share of
// the purchase path it may hold (cmd/flashline's saleShare) are the sale's
// across its variants, as for a sale without variants: a sale of 100
// variants does not run 100 times the batches of one SKU.

// full reports whether a new request of saleID would be refused: its queue
// holds as many rounds of batches as its bound allows.
func (co *coalescer) full(saleID string) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	q := co.sales[saleID]
	return q != nil && co.fullLocked(q)
}

func (co *coalescer) fullLocked(q *saleQueue) bool {
	return co.store.opts.QueueRounds > 0 &&
		len(q.waiting) >= q.bound.rounds*co.store.opts.MaxBatch*co.store.opts.BatchesInFlight
}

// take returns the next batch of saleID's queue, or nil when the sale already has
// as many batches running as allowed, across its variants, or nothing waits. co.mu is held.
func (co *coalescer) take(saleID string, q *saleQueue) []*call {
	if q.running >= co.store.opts.BatchesInFlight || len(q.waiting) == 0 {
		if q.running == 0 && len(q.waiting) == 0 {
			delete(co.sales, saleID)
		}
		return nil
	}
	if q.running > 0 && len(q.waiting) < concurrentFill(co.store.opts.MaxBatch) {
		// A batch beside a running one would be small: it would pay a
		// commit (an fsync) for a few requests, and on one bucket hold the
		// row lock as long as a full batch. The running batch's end takes
		// them.
		return nil
	}
	max := co.store.opts.MaxBatch
	batch := make([]*call, 0, min(max, len(q.waiting)))
	customers := make(map[string]bool, cap(batch))
	instruments := make(map[string]bool)
	rest := q.waiting[:0]
	now := time.Now()
	// One variant per batch: the oldest waiting request's ("" for a sale
	// without variants, whose requests all have it).
	variant := q.waiting[0].req.Variant
	for _, c := range q.waiting {
		instrument := c.req.PaymentInstrument
		switch {
		case c.req.Variant != variant || len(batch) == max || customers[c.req.CustomerID] || (instrument != "" && instruments[instrument]):
			rest = append(rest, c) // next batch
		case c.deadline.Sub(now) < 2*q.batchTime:
			// Too little time left for a batch as long as they take now:
			// it would cut the whole batch short (it runs under the
			// earliest deadline of its calls), so it is refused alone.
			c.finish(flashline.ReserveResult{}, fmt.Errorf("reserve sale %s: no time left for a batch within the reserve timeout: %w", c.req.SaleID, flashline.ErrOverloaded))
		case c.client.Err() != nil:
			// Nobody hears its answer, and run detached it could take a
			// unit after its retry was told sold out elsewhere. A gated
			// attempt's unit goes back (gate.giveBack).
			c.finish(flashline.ReserveResult{}, fmt.Errorf("reserve sale %s: the client left before its batch began: %w", c.req.SaleID, context.Cause(c.client)))
		default:
			customers[c.req.CustomerID] = true
			if instrument != "" {
				instruments[instrument] = true
			}
			batch = append(batch, c)
		}
	}
	clear(q.waiting[len(rest):])
	q.waiting = rest
	if len(batch) == 0 { // every one of the variant's had waited too long
		if len(q.waiting) > 0 {
			// Other variants' requests wait: the next oldest's variant (each
			// pass has answered at least the oldest, so this ends).
			return co.take(saleID, q)
		}
		if q.running == 0 {
			delete(co.sales, saleID)
		}
		return nil
	}
	q.bound.tick(now, co.store.opts.QueueRounds)
	for _, c := range batch {
		if c.attempts == 0 { // a carried-over request waited for its own reasons
			q.bound.observe(q.started - c.round)
		}
	}
	q.started++
	q.running++
	return batch
}

// claimBucket picks the bucket a batch of saleID takes (pickBucket), one no
// other running batch of the sale on this instance holds when there is one,
// and counts it held until releaseBucket.
func (co *coalescer) claimBucket(saleID string, buckets, quantities []int32, quantity int) int {
	co.mu.Lock()
	defer co.mu.Unlock()
	q := co.sales[saleID]
	if q == nil { // a batch run outside the coalescer (tests)
		return pickBucket(buckets, quantities, quantity, nil)
	}
	i := pickBucket(buckets, quantities, quantity, q.busy)
	if i >= 0 {
		if q.busy == nil {
			q.busy = make(map[int32]int)
		}
		q.busy[buckets[i]]++
	}
	return i
}

// releaseBucket ends a claim of claimBucket.
func (co *coalescer) releaseBucket(saleID string, bucket int32) {
	co.mu.Lock()
	defer co.mu.Unlock()
	q := co.sales[saleID]
	if q == nil || q.busy[bucket] == 0 {
		return
	}
	if q.busy[bucket]--; q.busy[bucket] == 0 {
		delete(q.busy, bucket)
	}
}

// concurrentFill is how many requests must wait before a batch starts beside
// one of the same sale already running (Options.BatchesInFlight > 1): a quarter
// of a full batch. The first batch of a sale always starts at once.
func concurrentFill(maxBatch int) int { return max(1, maxBatch/4) }

// run executes batch, then starts the sale's next batch if requests wait.
func (co *coalescer) run(saleID string, batch []*call) {
	for batch != nil {
		start := time.Now()
		again := co.store.reserveBatch(batch)
		took := time.Since(start)
		co.mu.Lock()
		q := co.sales[saleID]
		q.running--
		q.batchTime = (3*q.batchTime + took) / 4
		// Carried-over requests go first: they arrived before the rest.
		q.waiting = append(again, q.waiting...)
		batch = co.take(saleID, q)
		co.mu.Unlock()
	}
}
