package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// A batch is one transaction for up to MaxBatch reservations of one sale
// (coalescer.go gathers them): BEGIN and one read for every request
// (ReserveBatchBegin), sent together; the decisions per request, in Go; one
// statement that takes the stock of all the requests that may have it and
// writes their reservations and keys and the batch's ledger row
// (ReserveBatchCommit); COMMIT. Three round trips.

// reserveBatch runs one batch and answers its calls, except those it returns:
// requests to carry over to a later batch.
func (s *Store) reserveBatch(batch []*call) (again []*call) {
	if s.opts.OnBatch != nil {
		s.opts.OnBatch(len(batch))
	}
	// The batch ends by the earliest deadline of its calls, so that each is
	// answered within its own: a statement cut short rolls the whole batch
	// back (every call answered ErrOverloaded, nothing written). Its COMMIT,
	// once sent, is not cut short (pipelinedTx): a commit of unknown outcome
	// would answer "overloaded" for reservations that exist.
	deadline := batch[0].deadline
	for _, c := range batch[1:] {
		if c.deadline.Before(deadline) {
			deadline = c.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	var b batchRun
	key := batch[0].req.SaleID
	err := s.withSaleConn(ctx, func(conn *pgxpool.Conn) error {
		// BEGIN travels with the read (pipeline.go).
		return pipelinedTx(ctx, conn.Conn(), func(tx *beginFirst) error {
			b = batchRun{q: dbsqlc.New(tx), calls: batch, afterBegin: s.testHookAfterBegin,
				pick: func(buckets, quantities []int32, quantity int) int {
					return s.batches.claimBucket(key, buckets, quantities, quantity)
				}}
			if err := b.execute(ctx); err != nil {
				return err
			}
			if s.testHookBeforeCommit != nil {
				s.testHookBeforeCommit()
			}
			return nil
		})
	})
	// The bucket's row lock ended with the transaction.
	if b.claimed {
		s.batches.releaseBucket(key, b.bucket)
	}
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
	if s.opts.OnConnWait != nil {
		s.opts.OnConnWait(time.Since(start))
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
	// pick chooses the batch's bucket (the coalescer's claimBucket); bucket
	// is the one it claimed, to release once the transaction has ended.
	pick    func(buckets, quantities []int32, quantity int) int
	claimed bool
	bucket  int32
}

func (b *batchRun) execute(ctx context.Context) error {
	n := len(b.calls)
	b.results, b.errs, b.again = make([]flashline.ReserveResult, n), make([]error, n), make([]bool, n)
	p := dbsqlc.ReserveBatchBeginParams{
		CustomerIds:     make([]string, n),
		IdempotencyKeys: make([]string, n),
		AdmissionIds:    make([]string, n),
		Instruments:     make([]string, n),
		GateSeqs:        make([]int64, n),
		SaleID:          b.calls[0].req.SaleID,
		Variant:         b.calls[0].req.Variant, // one variant per batch (coalescer.go)
	}
	for i, c := range b.calls {
		p.CustomerIds[i], p.IdempotencyKeys[i] = c.req.CustomerID, c.req.IdempotencyKey
		p.AdmissionIds[i], p.Instruments[i] = c.req.AdmissionID, c.req.PaymentInstrument
		p.GateSeqs[i] = c.req.GateSeq
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
		case row.Stored:
			b.results[i] = flashline.ReserveResult{Receipt: storedReceipt(row.ResponseBody, row.StoredReservationID,
				row.StoredSaleID, row.StoredQuantity, b.calls[i].req.Variant, row.StoredExpiresAt), Replayed: true}
		default:
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if err := b.allocate(ctx, rows[0], pending); err != nil {
		return err
	}
	return b.replayNotSoldOut(ctx)
}

// replayNotSoldOut carries over to a later batch, instead of answering sold
// out, every call whose key has a stored answer by now: another attempt with
// the same key committed between this batch's read and its lock on the
// customer, so the read saw the unit that attempt took but not its answer.
// The later batch replays it. (TestNorthline's retry storm met it once: a
// retry heard sold_out while its abandoned first attempt held the last unit.)
func (b *batchRun) replayNotSoldOut(ctx context.Context) error {
	var customers, keys []string
	var idx []int
	for i, err := range b.errs {
		if errors.Is(err, flashline.ErrSoldOut) {
			customers = append(customers, b.calls[i].req.CustomerID)
			keys = append(keys, b.calls[i].req.IdempotencyKey)
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	stored, err := b.q.ReserveKeysStored(ctx, dbsqlc.ReserveKeysStoredParams{CustomerIds: customers, IdempotencyKeys: keys})
	if err != nil {
		return err
	}
	for _, k := range stored {
		for _, i := range idx {
			if c := b.calls[i].req; c.CustomerID == k.CustomerID && c.IdempotencyKey == k.Key {
				b.errs[i], b.again[i] = nil, true
			}
		}
	}
	return nil
}

// decide answers one request from what ReserveBatchBegin read, in the order
// the checks would run for a request on its own. nil with no stored receipt
// means the request may take stock; errRetry means try it in a later batch.
func decide(req flashline.ReserveRequest, row dbsqlc.ReserveBatchBeginRow) error {
	switch {
	case row.Stored:
		if !bytes.Equal(row.RequestHash, req.Fingerprint) {
			return flashline.ErrIdempotencyKeyReused
		}
		return nil
	case !row.Locked:
		// Another transaction is reserving for this customer right now:
		// perhaps this very key on another instance. Its outcome decides
		// this one's (replay or limit reached).
		return errRetry
	case row.GateReturned:
		// The gate's unit for this request was given back (the request
		// outlived its first attempt): the gate must hand out another.
		return flashline.ErrGateUnitReturned
	case row.VariantCount > 0 && req.Variant == "":
		return flashline.Invalid("this sale has variants: name one (\"variant\": its SKU)")
	case row.VariantCount == 0 && req.Variant != "":
		return flashline.Invalid("this sale has no variants: leave out \"variant\"")
	case len(row.Buckets) == 0:
		return flashline.Invalid("this sale has no variant " + req.Variant)
	case !row.IsOpen:
		return flashline.ErrSaleNotOpen
	case req.Quantity > int(row.PerCustomerLimit):
		return flashline.ErrQuantityAboveLimit
	case flashline.Admission(row.Admission).NeedsAdmission() && req.AdmissionToken == "":
		return flashline.ErrAdmissionRequired
	case flashline.Admission(row.Admission).NeedsAdmission() && (req.AdmissionID == "" || row.AdmissionUsed):
		return flashline.ErrAdmissionInvalid
	case req.AdmissionVariant != "" && req.Variant != req.AdmissionVariant:
		return flashline.ErrVariantNotWon
	case !flashline.AccountOldEnough(req.AccountCreated, int(row.MinAccountAgeSeconds), row.Now):
		return flashline.ErrAccountTooNew
	case row.HasActive:
		return flashline.ErrLimitReached
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
	// Per call index, for the calls that may take stock: the reservation,
	// whose receipt its key replays byte for byte (storedReceipt).
	reservations := make([]flashline.Reservation, len(b.calls))
	for _, i := range pending {
		c := b.calls[i]
		reservations[i] = flashline.Reservation{
			ID:         flashline.NewID(flashline.ReservationIDPrefix),
			SaleID:     c.req.SaleID,
			CustomerID: c.req.CustomerID,
			Quantity:   c.req.Quantity,
			Variant:    c.req.Variant,
			State:      flashline.ReservationPending,
			CreatedAt:  now,
			ExpiresAt:  expiresAt,
		}
	}

	quantities := sale.Quantities
	smallest := b.calls[pending[0]].req.Quantity
	for _, i := range pending {
		smallest = min(smallest, b.calls[i].req.Quantity)
	}
	bucket := b.pick(sale.Buckets, quantities, smallest)
	if bucket >= 0 {
		b.claimed, b.bucket = true, sale.Buckets[bucket]
	}
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
		for _, i := range pending {
			p.Gated = p.Gated || b.calls[i].req.GateSeq != 0
		}
		for _, i := range granted {
			c := b.calls[i]
			p.ReservationIds = append(p.ReservationIds, reservations[i].ID)
			p.CustomerIds = append(p.CustomerIds, c.req.CustomerID)
			p.IdempotencyKeys = append(p.IdempotencyKeys, c.req.IdempotencyKey)
			p.Quantities = append(p.Quantities, int32(c.req.Quantity))
			p.RequestHashes = append(p.RequestHashes, c.req.Fingerprint)
			p.AdmissionIds = append(p.AdmissionIds, c.req.AdmissionID)
			p.Instruments = append(p.Instruments, c.req.PaymentInstrument)
			p.GateSeqs = append(p.GateSeqs, c.req.GateSeq)
		}
		res, err := b.q.ReserveBatchCommit(ctx, p)
		if reservationConflict(err) {
			return b.runAgain()
		}
		if err != nil {
			return err
		}
		switch {
		case res.Decremented == 0 && locked:
			return fmt.Errorf("reserve batch: decrement of %d missed bucket %d while locked", total, p.Bucket)
		case res.Decremented == 0:
			// Others took stock since the read: allocate against the
			// quantity as it stands, under the row lock.
			q, err := b.q.ReserveLockBucket(ctx, dbsqlc.ReserveLockBucketParams{SaleID: p.SaleID, Bucket: p.Bucket})
			if err != nil {
				return err
			}
			available, locked = int(q), true
			continue
		case int(res.Reserved) != len(granted):
			// A payment instrument's units or a gate unit given back since
			// the read kept a row out.
			return b.runAgain()
		}
		for _, i := range granted {
			b.results[i] = flashline.ReserveResult{Reservation: reservations[i], Receipt: flashline.NewReceipt(reservations[i]).Bytes()}
		}
		b.shortOfStock(short, otherBuckets(quantities, bucket))
		return nil
	}
}

// runAgain undoes the batch (the units go back with the rollback) and runs
// every request again, where a fresh read answers the one concerned.
func (b *batchRun) runAgain() error {
	clear(b.errs)
	clear(b.results)
	for i := range b.again {
		b.again[i] = true
	}
	return errRollback
}

// shortOfStock answers calls that their bucket could not serve: sold out when
// no other bucket showed enough stock, else carried over to a later batch.
func (b *batchRun) shortOfStock(calls []int, others []int32) {
	for _, i := range calls {
		q := int32(b.calls[i].req.Quantity)
		b.errs[i] = flashline.ErrSoldOut
		if b.calls[i].req.Variant != "" {
			b.errs[i] = flashline.ErrVariantSoldOut
		}
		for _, o := range others {
			if o >= q {
				b.errs[i], b.again[i] = nil, true
				break
			}
		}
	}
}

// pickBucket picks a bucket index holding at least quantity units, at random
// so that batches of several instances spread over the rows, and among them
// one that busy does not name if there is one (busy: the buckets this
// instance's running batches of the sale hold; nil: none); -1 if none.
func pickBucket(buckets, quantities []int32, quantity int, busy map[int32]int) int {
	pick, seen, pickFree, seenFree := -1, 0, -1, 0
	for i := range buckets {
		if int(quantities[i]) < quantity {
			continue
		}
		seen++
		if rand.IntN(seen) == 0 {
			pick = i
		}
		if busy[buckets[i]] == 0 {
			seenFree++
			if rand.IntN(seenFree) == 0 {
				pickFree = i
			}
		}
	}
	if pickFree >= 0 {
		return pickFree
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
