package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/sql/dbsqlc"
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
	req      flashline.ReserveRequest
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
// back up to Store.QueueRounds. A burst, or a hiccup of the database, is
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

// submit queues c and returns when it has its answer. A sale whose queue is
// full refuses c at once with ErrOverloaded (see full): c would wait for more
// rounds of batches than the bound allows, and more waiting would add
// latency without selling one unit more (the batches are full already).
func (co *coalescer) submit(c *call) {
	co.mu.Lock()
	q := co.sales[c.req.SaleID]
	if q == nil {
		q = &saleQueue{bound: queueBound{rounds: co.store.QueueRounds, start: time.Now()}}
		co.sales[c.req.SaleID] = q
	}
	if co.fullLocked(q) {
		co.mu.Unlock()
		if co.store.OnQueueFull != nil {
			co.store.OnQueueFull()
		}
		c.finish(flashline.ReserveResult{}, fmt.Errorf("reserve sale %s: its batches are full: %w", c.req.SaleID, flashline.ErrOverloaded))
		return
	}
	c.round = q.started
	q.waiting = append(q.waiting, c)
	batch := co.take(c.req.SaleID, q)
	co.mu.Unlock()
	if batch != nil {
		co.run(c.req.SaleID, batch)
	}
	<-c.done
}

// full reports whether a new request of saleID would be refused: its queue
// holds as many rounds of batches as its bound allows.
func (co *coalescer) full(saleID string) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	q := co.sales[saleID]
	return q != nil && co.fullLocked(q)
}

func (co *coalescer) fullLocked(q *saleQueue) bool {
	return co.store.QueueRounds > 0 &&
		len(q.waiting) >= q.bound.rounds*co.store.MaxBatch*co.store.BatchesInFlight
}

// take returns the next batch for a sale, or nil when the sale already has
// as many batches running as allowed or nothing waits. co.mu is held.
func (co *coalescer) take(saleID string, q *saleQueue) []*call {
	if q.running >= co.store.BatchesInFlight || len(q.waiting) == 0 {
		if q.running == 0 && len(q.waiting) == 0 {
			delete(co.sales, saleID)
		}
		return nil
	}
	max := co.store.MaxBatch
	batch := make([]*call, 0, min(max, len(q.waiting)))
	customers := make(map[string]bool, cap(batch))
	instruments := make(map[string]bool)
	rest := q.waiting[:0]
	now := time.Now()
	for _, c := range q.waiting {
		instrument := c.req.PaymentInstrument
		switch {
		case len(batch) == max || customers[c.req.CustomerID] || (instrument != "" && instruments[instrument]):
			rest = append(rest, c) // next batch
		case now.After(c.deadline):
			c.finish(flashline.ReserveResult{}, flashline.ErrOverloaded)
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
	if len(batch) == 0 { // every one of them had waited too long
		if q.running == 0 && len(q.waiting) == 0 {
			delete(co.sales, saleID)
		}
		return nil
	}
	q.bound.tick(now, co.store.QueueRounds)
	for _, c := range batch {
		if c.attempts == 0 { // a carried-over request waited for its own reasons
			q.bound.observe(q.started - c.round)
		}
	}
	q.started++
	q.running++
	return batch
}

// run executes batch, then starts the sale's next batch if requests wait.
func (co *coalescer) run(saleID string, batch []*call) {
	again := co.store.reserveBatch(batch)
	co.mu.Lock()
	q := co.sales[saleID]
	q.running--
	// Carried-over requests go first: they arrived before the rest.
	q.waiting = append(again, q.waiting...)
	next := co.take(saleID, q)
	co.mu.Unlock()
	if next != nil {
		// The next batch runs on its own goroutine, so that this one's
		// caller, answered by now, is not held up by others.
		go co.run(saleID, next)
	}
}

// reserveBatch runs one batch and answers its calls, except those it returns:
// requests to carry over to a later batch.
func (s *Store) reserveBatch(batch []*call) (again []*call) {
	if s.OnBatch != nil {
		s.OnBatch(len(batch))
	}
	deadline := batch[0].deadline
	for _, c := range batch[1:] {
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	var b batchRun
	err := s.withSaleConn(ctx, func(conn *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			b = batchRun{q: dbsqlc.New(tx), calls: batch, afterBegin: s.testHookAfterBegin}
			return b.execute(ctx)
		})
	})
	if errors.Is(err, errRollback) {
		err = nil // b.again holds every call
	}
	if err != nil {
		err = fmt.Errorf("reserve sale %s: %w", batch[0].req.SaleID, translate(err))
		if len(batch) > 1 && !errors.Is(err, flashline.ErrUnavailable) && !errors.Is(err, flashline.ErrOverloaded) {
			// Something in the batch made a statement fail: run each request
			// on its own, so that only the one at fault fails.
			for _, c := range batch {
				again = append(again, s.reserveBatch([]*call{c})...)
			}
			return again
		}
		for _, c := range batch {
			c.finish(flashline.ReserveResult{}, err)
		}
		return nil
	}
	for i, c := range batch {
		switch {
		case b.again[i]:
			c.attempts++
			if c.attempts >= maxAttempts {
				c.finish(flashline.ReserveResult{}, fmt.Errorf("reserve sale %s: %w", c.req.SaleID, flashline.ErrRequestInProgress))
				continue
			}
			again = append(again, c)
		case b.errs[i] != nil:
			c.finish(flashline.ReserveResult{}, fmt.Errorf("reserve sale %s: %w", c.req.SaleID, b.errs[i]))
		default:
			c.finish(b.results[i], nil)
		}
	}
	return again
}

// withSaleConn runs fn on a connection of the purchase path's pool, and
// reports how long the batch waited for it (OnConnWait): the one queue behind
// the coalescer that the admission limiter must keep from standing.
func (s *Store) withSaleConn(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	start := time.Now()
	conn, err := s.sale.Acquire(ctx)
	if s.OnConnWait != nil {
		s.OnConnWait(time.Since(start))
	}
	if err != nil {
		return err
	}
	defer conn.Release()
	return fn(conn)
}

// batchRun is one batch's transaction.
type batchRun struct {
	q     *dbsqlc.Queries
	calls []*call
	// Per call: its answer, its error, or whether to carry it over.
	results []flashline.ReserveResult
	errs    []error
	again   []bool

	afterBegin func() // tests only
}

func (b *batchRun) execute(ctx context.Context) error {
	n := len(b.calls)
	b.results, b.errs, b.again = make([]flashline.ReserveResult, n), make([]error, n), make([]bool, n)
	p := dbsqlc.ReserveBatchBeginParams{
		CustomerIds:     make([]string, n),
		IdempotencyKeys: make([]string, n),
		AdmissionIds:    make([]string, n),
		Instruments:     make([]string, n),
		SaleID:          b.calls[0].req.SaleID,
	}
	for i, c := range b.calls {
		p.CustomerIds[i], p.IdempotencyKeys[i] = c.req.CustomerID, c.req.IdempotencyKey
		p.AdmissionIds[i], p.Instruments[i] = c.req.AdmissionID, c.req.PaymentInstrument
	}
	rows, err := b.q.ReserveBatchBegin(ctx, p)
	if err != nil {
		return err
	}
	if b.afterBegin != nil {
		b.afterBegin()
	}
	if len(rows) != n {
		// No such sale (no row at all), or a broken statement.
		if len(rows) == 0 {
			for i := range b.errs {
				b.errs[i] = flashline.ErrNotFound
			}
			return nil
		}
		return fmt.Errorf("reserve batch: %d rows for %d requests", len(rows), n)
	}

	var pending []int // calls that may take stock, in arrival order
	for i, row := range rows {
		switch err := decide(b.calls[i].req, row); {
		case errors.Is(err, errRetry):
			b.again[i] = true
		case err != nil:
			b.errs[i] = err
		case row.StatusCode != 0:
			b.results[i] = flashline.ReserveResult{Status: int(row.StatusCode), Body: row.ResponseBody, Replayed: true}
		default:
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return b.allocate(ctx, rows[0], pending)
}

// decide answers one request from what ReserveBatchBegin read, in the order
// the checks would run for a request on its own. nil with no stored status
// means the request may take stock; errRetry means try it in a later batch.
func decide(req flashline.ReserveRequest, row dbsqlc.ReserveBatchBeginRow) error {
	switch {
	case row.StatusCode != 0:
		if !bytes.Equal(row.RequestHash, req.Fingerprint) {
			return flashline.ErrIdempotencyKeyReused
		}
		return nil
	case !row.Locked:
		// Another transaction is reserving for this customer right now:
		// perhaps this very key on another instance. Its outcome decides
		// this one's (replay or limit reached).
		return errRetry
	case !row.IsOpen:
		return flashline.ErrSaleNotOpen
	case req.Quantity > int(row.PerCustomerLimit):
		return flashline.ErrQuantityAboveLimit
	case row.Admission == flashline.AdmissionWaitingRoom && req.AdmissionToken == "":
		return flashline.ErrAdmissionRequired
	case row.Admission == flashline.AdmissionWaitingRoom && (req.AdmissionID == "" || row.AdmissionUsed):
		return flashline.ErrAdmissionInvalid
	case !flashline.AccountOldEnough(req.AccountCreated, int(row.MinAccountAgeSeconds), row.Now):
		return flashline.ErrAccountTooNew
	case row.HasActive:
		return flashline.ErrLimitReached
	case row.PerInstrumentLimit > 0 && req.PaymentInstrument == "":
		return flashline.Invalid("this sale limits units per payment instrument: paymentInstrument is required")
	case !row.InstrumentLocked:
		return errRetry // another transaction is reserving on this instrument
	case row.PerInstrumentLimit > 0 && int(row.InstrumentUnits)+req.Quantity > int(row.PerInstrumentLimit):
		return flashline.ErrInstrumentLimitReached
	}
	return nil
}

// allocate gives stock to the pending calls in arrival order, from one bucket
// per transaction: buckets are locked one at a time, so two batches never
// wait for each other's buckets (no deadlock). Calls the bucket cannot serve
// are carried over while another bucket showed enough stock, and are sold
// out otherwise.
func (b *batchRun) allocate(ctx context.Context, sale dbsqlc.ReserveBatchBeginRow, pending []int) error {
	now := sale.Now
	expiresAt := now.Add(time.Duration(sale.ReservationTtlSeconds) * time.Second).Truncate(time.Second).UTC()
	// Per call index, for the calls that may take stock.
	bodies, reservationIDs := make([][]byte, len(b.calls)), make([]string, len(b.calls))
	for _, i := range pending {
		c := b.calls[i]
		r := flashline.Reservation{
			ID:         flashline.NewID(flashline.ReservationIDPrefix),
			SaleID:     c.req.SaleID,
			CustomerID: c.req.CustomerID,
			Quantity:   c.req.Quantity,
			State:      flashline.ReservationPending,
			CreatedAt:  now,
			ExpiresAt:  expiresAt,
		}
		body, err := c.req.Render(r)
		if err != nil {
			return err
		}
		bodies[i], reservationIDs[i] = body, r.ID
	}

	quantities := sale.Quantities
	smallest := b.calls[pending[0]].req.Quantity
	for _, i := range pending {
		smallest = min(smallest, b.calls[i].req.Quantity)
	}
	bucket := pickBucket(sale.Buckets, quantities, smallest)
	if bucket < 0 {
		b.shortOfStock(pending, quantities)
		return nil
	}
	available := int(quantities[bucket]) // as read, without a lock
	locked := false
	for {
		var granted, short []int
		total := 0
		for _, i := range pending {
			if q := b.calls[i].req.Quantity; total+q <= available {
				total += q
				granted = append(granted, i)
			} else {
				short = append(short, i)
			}
		}
		if len(granted) == 0 {
			b.shortOfStock(short, otherBuckets(quantities, bucket))
			return nil
		}
		p := dbsqlc.ReserveBatchCommitParams{
			SaleID:    b.calls[0].req.SaleID,
			Bucket:    sale.Buckets[bucket],
			Total:     int32(total),
			ExpiresAt: expiresAt,

			PerInstrumentLimit: sale.PerInstrumentLimit,
		}
		for _, i := range granted {
			c := b.calls[i]
			p.ReservationIds = append(p.ReservationIds, reservationIDs[i])
			p.CustomerIds = append(p.CustomerIds, c.req.CustomerID)
			p.IdempotencyKeys = append(p.IdempotencyKeys, c.req.IdempotencyKey)
			p.Quantities = append(p.Quantities, int32(c.req.Quantity))
			p.RequestHashes = append(p.RequestHashes, c.req.Fingerprint)
			p.ResponseBodies = append(p.ResponseBodies, bodies[i])
			p.AdmissionIds = append(p.AdmissionIds, c.req.AdmissionID)
			p.Instruments = append(p.Instruments, c.req.PaymentInstrument)
		}
		res, err := b.q.ReserveBatchCommit(ctx, p)
		if err != nil {
			return err
		}
		switch {
		case res.Decremented == 0 && locked:
			return fmt.Errorf("reserve batch: decrement of %d missed bucket %d while locked", total, p.Bucket)
		case res.Decremented == 0:
			// Others took stock since the read: allocate against the
			// quantity as it stands, under the row lock.
			q, err := b.q.ReserveLockBucket(ctx, p.SaleID, p.Bucket)
			if err != nil {
				return err
			}
			available, locked = int(q), true
			continue
		case int(res.Reserved) != len(granted) || int(res.KeyStored) != len(granted):
			// A reservation or key of one of these customers was committed
			// between the read and the customer's lock. Undo the batch
			// (the units go back with the rollback) and run every request
			// again, where a fresh read answers the one concerned.
			clear(b.errs)
			clear(b.results)
			for i := range b.again {
				b.again[i] = true
			}
			return errRollback
		}
		for _, i := range granted {
			b.results[i] = flashline.ReserveResult{Status: 201, Body: bodies[i]}
		}
		b.shortOfStock(short, otherBuckets(quantities, bucket))
		return nil
	}
}

// shortOfStock answers calls that their bucket could not serve: sold out when
// no other bucket showed enough stock, else carried over to a later batch.
func (b *batchRun) shortOfStock(calls []int, others []int32) {
	for _, i := range calls {
		q := int32(b.calls[i].req.Quantity)
		b.errs[i] = flashline.ErrSoldOut
		for _, o := range others {
			if o >= q {
				b.errs[i], b.again[i] = nil, true
				break
			}
		}
	}
}

// pickBucket picks a bucket index holding at least quantity units, at random
// so that batches of several instances spread over the rows; -1 if none.
func pickBucket(buckets, quantities []int32, quantity int) int {
	pick, seen := -1, 0
	for i := range buckets {
		if int(quantities[i]) >= quantity {
			seen++
			if rand.IntN(seen) == 0 {
				pick = i
			}
		}
	}
	return pick
}

// otherBuckets returns the quantities read for every bucket but one.
func otherBuckets(quantities []int32, except int) []int32 {
	others := make([]int32, 0, len(quantities))
	for i, q := range quantities {
		if i != except {
			others = append(others, q)
		}
	}
	return others
}
