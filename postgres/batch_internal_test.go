package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
	"github.com/flashline/flashline/internal/testkit/testdb"
)

// These tests hand one batch to reserveBatch directly, so that what shares a
// transaction is decided by the test, not by timing.

func batchStore(t *testing.T, n flashline.NewSale) (*Store, flashline.Sale) {
	t.Helper()
	pool, _ := testdb.NewPool(t)
	s := NewStore(SinglePool(pool), Options{})
	if n.SKU == "" {
		n.SKU = "sku_batch"
	}
	if n.ReservationTTLSeconds == 0 {
		n.ReservationTTLSeconds = 600
	}
	sale, err := s.CreateSale(context.Background(), n)
	require.NoError(t, err)
	return s, sale
}

func newCall(saleID, customer, key string, qty int) *call {
	return &call{
		req: flashline.ReserveRequest{
			SaleID: saleID, CustomerID: customer, IdempotencyKey: key, Quantity: qty,
			Fingerprint: fmt.Appendf(nil, "%s/%d", saleID, qty),
		},
		client:   context.Background(),
		deadline: time.Now().Add(10 * time.Second),
		done:     make(chan struct{}),
	}
}

// runBatch runs calls as one batch and returns what reserveBatch carried over.
func runBatch(t *testing.T, s *Store, calls ...*call) []*call {
	t.Helper()
	again := s.reserveBatch(calls)
	for _, c := range calls {
		carried := false
		for _, a := range again {
			carried = carried || a == c
		}
		if !carried {
			select {
			case <-c.done:
			default:
				t.Fatalf("call %s/%s neither answered nor carried over", c.req.CustomerID, c.req.IdempotencyKey)
			}
		}
	}
	return again
}

func checkInvariant(t *testing.T, s *Store, saleID string) flashline.Sale {
	t.Helper()
	sale, err := s.Sale(context.Background(), saleID)
	require.NoError(t, err)
	require.True(t, sale.Invariant.OK, "invariant: %+v", sale)
	require.Equal(t, sale.InitialStock, sale.Available+sale.Pending+sale.Confirmed)
	return sale
}

func TestBatchSoldOutBoundaryInArrivalOrder(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 3, PerCustomerLimit: 2})
	// 3 units; asks of 2, 2, 1, 1 in that order: the first and third fit,
	// exactly as if each had come alone in that order.
	a, b, c, d := newCall(sale.ID, "a", "k", 2), newCall(sale.ID, "b", "k", 2), newCall(sale.ID, "c", "k", 1), newCall(sale.ID, "d", "k", 1)
	require.Empty(t, runBatch(t, s, a, b, c, d))
	require.NoError(t, a.err)
	require.NotEmpty(t, a.res.Receipt)
	require.ErrorIs(t, b.err, flashline.ErrSoldOut)
	require.NoError(t, c.err)
	require.ErrorIs(t, d.err, flashline.ErrSoldOut)
	got := checkInvariant(t, s, sale.ID)
	require.Equal(t, 0, got.Available)
	require.Equal(t, 3, got.Pending)
}

func TestBatchStaleReadAllocatesUnderLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 5, PerCustomerLimit: 1})
	// Another transaction takes 3 units after the batch's read but before
	// its decrement: the decrement of 5 misses, and the batch allocates the
	// 2 that are left, in arrival order, under the row lock.
	calls := make([]*call, 5)
	for i := range calls {
		calls[i] = newCall(sale.ID, fmt.Sprintf("c%d", i), "k", 1)
	}
	s.testHookAfterBegin = func() {
		_, err := s.admin.Exec(ctx, "UPDATE stock SET quantity = quantity - 3 WHERE sale_id = $1", sale.ID)
		require.NoError(t, err)
		_, err = s.admin.Exec(ctx, "INSERT INTO stock_ledger (sale_id, bucket, delta, reason) VALUES ($1, 0, -3, 'reserve')", sale.ID)
		require.NoError(t, err)
		_, err = s.admin.Exec(ctx, "UPDATE sales SET initial_stock = initial_stock - 3 WHERE sale_id = $1", sale.ID)
		require.NoError(t, err)
	}
	require.Empty(t, runBatch(t, s, calls...))
	for i, c := range calls {
		if i < 2 {
			require.NoError(t, c.err, "call %d", i)
		} else {
			require.ErrorIs(t, c.err, flashline.ErrSoldOut, "call %d", i)
		}
	}
	require.Equal(t, 0, checkInvariant(t, s, sale.ID).Available)
}

func TestBatchDuplicatesAndLimitsDoNotFailOthers(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 10, PerCustomerLimit: 1})
	first := newCall(sale.ID, "alice", "k1", 1)
	require.Empty(t, runBatch(t, s, first))
	require.NoError(t, first.err)

	// One batch: alice's retry (replay), alice's key with another body,
	// bob new, and carol new.
	replay := newCall(sale.ID, "alice", "k1", 1)
	bob := newCall(sale.ID, "bob", "k1", 1)
	carol := newCall(sale.ID, "carol", "k9", 1)
	require.Empty(t, runBatch(t, s, replay, bob, carol))
	require.NoError(t, replay.err)
	require.True(t, replay.res.Replayed)
	require.Equal(t, first.res.Receipt, replay.res.Receipt)
	require.NoError(t, bob.err)
	require.NoError(t, carol.err)

	// Another: alice with a new key (limit reached), bob's key reused with
	// another quantity, dave new.
	limit := newCall(sale.ID, "alice", "k2", 1)
	reused := newCall(sale.ID, "bob", "k1", 2)
	dave := newCall(sale.ID, "dave", "k1", 1)
	require.Empty(t, runBatch(t, s, limit, reused, dave))
	require.ErrorIs(t, limit.err, flashline.ErrLimitReached)
	require.ErrorIs(t, reused.err, flashline.ErrIdempotencyKeyReused)
	require.NoError(t, dave.err)
	require.Equal(t, 4, checkInvariant(t, s, sale.ID).Pending)
}

func TestBatchConflictCommittedAfterReadIsSkippedNotFatal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 10, PerCustomerLimit: 1})
	// erin's reservation is committed by someone else after the batch's
	// read (a session that skipped her lock). The batch must not abort for
	// the others: it is rolled back and carried over, and the next run
	// answers erin limit_reached and the others 201.
	erin, frank, gina := newCall(sale.ID, "erin", "k", 1), newCall(sale.ID, "frank", "k", 1), newCall(sale.ID, "gina", "k", 1)
	s.testHookAfterBegin = func() {
		s.testHookAfterBegin = nil
		_, err := s.admin.Exec(ctx, `
			WITH d AS (UPDATE stock SET quantity = quantity - 1 WHERE sale_id = $1 RETURNING sale_id),
			     r AS (INSERT INTO reservations (reservation_id, sale_id, customer_id, bucket, quantity, idempotency_key, expires_at)
			           SELECT 'res_other', sale_id, 'erin', 0, 1, 'other-key', now() + interval '10 minutes' FROM d)
			INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id) SELECT sale_id, 0, -1, 'reserve', 'res_other' FROM d`, sale.ID)
		require.NoError(t, err)
	}
	again := runBatch(t, s, erin, frank, gina)
	require.Len(t, again, 3)
	require.Empty(t, runBatch(t, s, again...))
	require.ErrorIs(t, erin.err, flashline.ErrLimitReached)
	require.NoError(t, frank.err)
	require.NoError(t, gina.err)
	require.Equal(t, 3, checkInvariant(t, s, sale.ID).Pending)
}

func TestBatchSoldOutReplaysAKeyCommittedAfterRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 1, PerCustomerLimit: 1})
	// erin's abandoned first attempt, on another instance, commits the last
	// unit with her key after this batch's read (whose snapshot predates it)
	// but before her lock was asked for: the read saw the unit, not the
	// answer. Her retry must replay that answer, not hear sold_out
	// (TestNorthline's retry storm met it once).
	erin := newCall(sale.ID, "erin", "k", 1)
	s.testHookAfterBegin = func() {
		s.testHookAfterBegin = nil
		_, err := s.admin.Exec(ctx, `
			WITH d AS (UPDATE stock SET quantity = quantity - 1 WHERE sale_id = $1 RETURNING sale_id),
			     r AS (INSERT INTO reservations (reservation_id, sale_id, customer_id, bucket, quantity, idempotency_key, request_hash,
			                                     receipt_expires_at, expires_at)
			           SELECT 'res_first', sale_id, 'erin', 0, 1, 'k', $2, now() + interval '10 minutes', now() + interval '10 minutes' FROM d)
			INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id) SELECT sale_id, 0, -1, 'reserve', 'res_first' FROM d`,
			sale.ID, erin.req.Fingerprint)
		require.NoError(t, err)
	}
	again := runBatch(t, s, erin)
	require.Len(t, again, 1, "carried over, not answered sold_out: %v", erin.err)
	require.Empty(t, runBatch(t, s, again...))
	require.NoError(t, erin.err)
	require.True(t, erin.res.Replayed)
	var receipt struct{ ReservationID string }
	require.NoError(t, json.Unmarshal(erin.res.Receipt, &receipt))
	require.Equal(t, "res_first", receipt.ReservationID)
	require.Equal(t, 1, checkInvariant(t, s, sale.ID).Pending)
}

func TestBatchFailingStatementFailsOnlyItsRequest(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 10, PerCustomerLimit: 1})
	// A NUL byte cannot be stored in a text column: the batch's statement
	// fails, the batch is run again one request at a time, and only the
	// request at fault fails.
	bad := newCall(sale.ID, "bad\x00customer", "k", 1)
	ok1, ok2 := newCall(sale.ID, "henry", "k", 1), newCall(sale.ID, "iris", "k", 1)
	require.Empty(t, runBatch(t, s, ok1, bad, ok2))
	require.NoError(t, ok1.err)
	require.NoError(t, ok2.err)
	require.Error(t, bad.err)
	require.Equal(t, 2, checkInvariant(t, s, sale.ID).Pending)
}

func TestBatchBucketsCarryOverUntilAllEmpty(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 4, PerCustomerLimit: 1, Buckets: 4})
	// One unit per bucket: a batch of 6 takes one bucket's unit, carries
	// over the rest while other buckets hold stock, and answers sold out
	// only when every bucket is empty.
	calls := make([]*call, 6)
	for i := range calls {
		calls[i] = newCall(sale.ID, fmt.Sprintf("b%d", i), "k", 1)
	}
	pending := calls
	for round := 0; len(pending) > 0; round++ {
		require.Less(t, round, 10)
		pending = runBatch(t, s, pending...)
	}
	won := 0
	for _, c := range calls {
		if c.err == nil {
			won++
		} else {
			require.ErrorIs(t, c.err, flashline.ErrSoldOut)
		}
	}
	require.Equal(t, 4, won)
	require.Equal(t, 0, checkInvariant(t, s, sale.ID).Available)
}

func TestBatchBucketServesTheAsksItCan(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 2, PerCustomerLimit: 2, Buckets: 2})
	// One unit in each bucket: an ask of 2 first cannot be served by any
	// bucket (sold out), and must not hold up the asks of 1 behind it.
	big, one, two := newCall(sale.ID, "big", "k", 2), newCall(sale.ID, "one", "k", 1), newCall(sale.ID, "two", "k", 1)
	pending := []*call{big, one, two}
	for round := 0; len(pending) > 0; round++ {
		require.Less(t, round, 4)
		pending = runBatch(t, s, pending...)
	}
	require.ErrorIs(t, big.err, flashline.ErrSoldOut)
	require.NoError(t, one.err)
	require.NoError(t, two.err)
	require.Equal(t, 0, checkInvariant(t, s, sale.ID).Available)
}

// TestSaleQueueIsBounded: with one batch running and QueueRounds rounds of
// requests waiting, one more request of the sale is refused at once with
// ErrOverloaded, and takes nothing from the others; every batch reports how
// long it waited for a connection.
func TestSaleQueueIsBounded(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 10, PerCustomerLimit: 1})
	s.opts.MaxBatch, s.opts.QueueRounds = 1, 2
	var waits, full atomic.Int64
	s.opts.OnConnWait = func(time.Duration) { waits.Add(1) }
	s.opts.OnQueueFull = func() { full.Add(1) }
	running, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.testHookAfterBegin = func() {
		once.Do(func() {
			close(running)
			<-release
		})
	}
	ctx := context.Background()
	results := make(chan error, 3)
	reserve := func(customer string) {
		_, err := s.Reserve(ctx, flashline.ReserveRequest{
			SaleID: sale.ID, CustomerID: customer, IdempotencyKey: "k", Quantity: 1, Fingerprint: []byte("f"),
		})
		results <- err
	}
	go reserve("first")
	<-running // the first batch holds the sale; the next two wait
	go reserve("second")
	go reserve("third")
	require.Eventually(t, func() bool {
		s.batches.mu.Lock()
		defer s.batches.mu.Unlock()
		return len(s.batches.sales[sale.ID].waiting) == 2
	}, 5*time.Second, time.Millisecond)

	start := time.Now()
	_, err := s.Reserve(ctx, flashline.ReserveRequest{SaleID: sale.ID, CustomerID: "fourth", IdempotencyKey: "k", Quantity: 1})
	require.ErrorIs(t, err, flashline.ErrOverloaded)
	require.Less(t, time.Since(start), time.Second, "refused at once, not after a wait")
	require.Equal(t, int64(1), full.Load())

	close(release)
	for range 3 {
		require.NoError(t, <-results)
	}
	require.Equal(t, int64(3), waits.Load(), "one connection wait per batch")
	got := checkInvariant(t, s, sale.ID)
	require.Equal(t, 3, got.Pending)
}

// TestQueueBound: a burst that drains is not a standing queue and the bound
// stays; a queue that never drained below a batch for a whole interval
// halves it, down to one round; every interval that drains adds a round back,
// up to the allowance.
func TestQueueBound(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := queueBound{rounds: 16, start: now}
	next := func(waited ...uint64) {
		for _, w := range waited {
			b.observe(w)
		}
		now = now.Add(boundInterval)
		b.tick(now, 16)
	}
	next(3, 2, 0, 4)
	require.Equal(t, 16, b.rounds, "one request went straight into the next batch: the queue drained")
	next(1, 2, 1)
	require.Equal(t, 8, b.rounds, "every request of the interval waited a round or more")
	b.observe(5)
	b.tick(now.Add(boundInterval/2), 16)
	require.Equal(t, 8, b.rounds, "not a whole interval yet")
	for _, want := range []int{4, 2, 1, 1} {
		next(1)
		require.Equal(t, want, b.rounds)
	}
	next(0, 1)
	require.Equal(t, 2, b.rounds, "a drained interval grows the bound by a round")
	next()
	require.Equal(t, 2, b.rounds, "an interval without batches says nothing")

	s := &Store{opts: Options{MaxBatch: 64, BatchesInFlight: 1, QueueRounds: 16}}
	co := &coalescer{store: s}
	q := &saleQueue{waiting: make([]*call, 127), bound: queueBound{rounds: 2}}
	require.False(t, co.fullLocked(q))
	q.waiting = append(q.waiting, nil)
	require.True(t, co.fullLocked(q), "two rounds of 64 wait")
	s.opts.QueueRounds = 0
	require.False(t, co.fullLocked(q), "QueueRounds 0: no bound")
}

// A batch takes a bucket that no other running batch of the sale holds, when
// one has enough stock; otherwise any bucket with enough.
func TestPickBucketAvoidsBusyBuckets(t *testing.T) {
	t.Parallel()
	buckets, quantities := []int32{0, 1, 2, 3}, []int32{5, 5, 0, 5}
	for range 200 {
		i := pickBucket(buckets, quantities, 1, map[int32]int{0: 1, 3: 2})
		require.Equal(t, 1, i, "the one free bucket with stock")
		i = pickBucket(buckets, quantities, 1, map[int32]int{0: 1, 1: 1, 3: 1})
		require.Contains(t, []int{0, 1, 3}, i, "all busy: any with stock, never the empty one")
		require.Equal(t, -1, pickBucket(buckets, quantities, 6, nil))
	}
}

// TestBatchWritesOneLedgerRow: a batch's decrement is one 'reserve' ledger
// row, of minus the units of every reservation it took them for, naming
// those reservations in arrival order (migration 000016); migration 000016's
// down splits it into one row per reservation, as the version before it
// writes them, in the batch's transaction, with the sums unchanged. The down
// runs in a transaction that is rolled back.
func TestBatchWritesOneLedgerRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 10, PerCustomerLimit: 2})
	calls := []*call{newCall(sale.ID, "a", "k", 1), newCall(sale.ID, "b", "k", 2), newCall(sale.ID, "c", "k", 1)}
	require.Empty(t, runBatch(t, s, calls...))
	var ids []string
	for _, c := range calls {
		require.NoError(t, c.err)
		ids = append(ids, c.res.Reservation.ID)
	}
	var delta int
	var named []string
	require.NoError(t, s.admin.QueryRow(ctx, `SELECT delta, reservation_ids FROM stock_ledger
		WHERE sale_id = $1 AND reason = 'reserve'`, sale.ID).Scan(&delta, &named))
	require.Equal(t, -4, delta)
	require.Equal(t, ids, named)
	checkInvariant(t, s, sale.ID)

	root, err := testdb.RepoRoot()
	require.NoError(t, err)
	down, err := os.ReadFile(filepath.Join(root, "migrations", "000016_ledger_per_batch.down.sql"))
	require.NoError(t, err)
	tx, err := s.admin.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, string(down))
	require.NoError(t, err)
	rows, err := tx.Query(ctx, `SELECT l.reservation_id, l.delta, r.quantity FROM stock_ledger l
		JOIN reservations r USING (reservation_id) WHERE l.sale_id = $1 AND l.reason = 'reserve' ORDER BY l.entry_id`, sale.ID)
	require.NoError(t, err)
	var split []string
	for rows.Next() {
		var id string
		var d, q int
		require.NoError(t, rows.Scan(&id, &d, &q))
		require.Equal(t, -q, d, id)
		split = append(split, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, ids, split)
	var ok bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT ok FROM sale_invariant WHERE sale_id = $1`, sale.ID).Scan(&ok))
	require.True(t, ok, "sale_invariant after the down migration")
	// The split rows keep the batch's transaction: the audit's stock change
	// is still ledgered by its own transaction.
	unledgered, err := dbsqlc.New(tx).StockAuditUnledgered(ctx, dbsqlc.StockAuditUnledgeredParams{SaleID: sale.ID})
	require.NoError(t, err)
	require.Empty(t, unledgered)
}

// TestReserveOfAClientGoneBeforeItsBatchIsDropped: the fault harness's
// latency and redis-stall faults found a first attempt whose client gave up
// after 3 ms run 80 ms to 2 s later, detached from its client, and take a
// unit after the client's retry had been told sold_out on another instance.
// An attempt whose client has left before its batch begins has done
// nothing, and is dropped.
func TestReserveOfAClientGoneBeforeItsBatchIsDropped(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 1, PerCustomerLimit: 1})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Reserve(gone, flashline.ReserveRequest{SaleID: sale.ID, CustomerID: "frank", IdempotencyKey: "k", Quantity: 1, Fingerprint: []byte("f")})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 0, checkInvariant(t, s, sale.ID).Pending, "nothing reserved")

	// A client still there is served as before.
	_, err = s.Reserve(context.Background(), flashline.ReserveRequest{SaleID: sale.ID, CustomerID: "frank", IdempotencyKey: "k", Quantity: 1, Fingerprint: []byte("f")})
	require.NoError(t, err)
	require.Equal(t, 1, checkInvariant(t, s, sale.ID).Pending)
}

// pastDeadlineOnce sets a test hook that, the first time it runs, waits
// past a 200 ms ReserveTimeout.
func pastDeadlineOnce(hook *func()) {
	*hook = func() {
		*hook = nil
		time.Sleep(300 * time.Millisecond)
	}
}

// TestReserveAnsweredWithinItsDeadlineDefinitely: a batch runs under the
// earliest deadline of its calls, so an attempt is answered within its
// ReserveTimeout, and its ErrOverloaded is definite: the batch cut short
// wrote nothing. (Answered at its deadline while its batch ran on, as
// before, TestOverloadSheds found 449 reservations held for 355 given to
// clients: the rest belonged to "overloaded" answers.)
func TestReserveAnsweredWithinItsDeadlineDefinitely(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 5, PerCustomerLimit: 1})
	s.opts.ReserveTimeout = 200 * time.Millisecond
	pastDeadlineOnce(&s.testHookAfterBegin) // after the read, before the write
	req := flashline.ReserveRequest{SaleID: sale.ID, CustomerID: "gina", IdempotencyKey: "k", Quantity: 1, Fingerprint: []byte("g")}
	_, err := s.Reserve(context.Background(), req)
	require.ErrorIs(t, err, flashline.ErrOverloaded)
	require.Equal(t, 0, checkInvariant(t, s, sale.ID).Pending, "an overloaded answer wrote nothing")

	s.opts.ReserveTimeout = 10 * time.Second
	res, err := s.Reserve(context.Background(), req)
	require.NoError(t, err)
	require.False(t, res.Replayed, "the retry reserves: there was nothing to replay")
	require.Equal(t, 1, checkInvariant(t, s, sale.ID).Pending)
}

// TestReserveCommitNotCutShortByItsDeadline: a COMMIT already sent when the
// deadline passes goes on, and the attempt is answered what it committed,
// not "overloaded" for a reservation that exists.
func TestReserveCommitNotCutShortByItsDeadline(t *testing.T) {
	t.Parallel()
	s, sale := batchStore(t, flashline.NewSale{InitialStock: 5, PerCustomerLimit: 1})
	s.opts.ReserveTimeout = 200 * time.Millisecond
	pastDeadlineOnce(&s.testHookBeforeCommit)
	req := flashline.ReserveRequest{SaleID: sale.ID, CustomerID: "hana", IdempotencyKey: "k", Quantity: 1, Fingerprint: []byte("h")}
	res, err := s.Reserve(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 1, checkInvariant(t, s, sale.ID).Pending)
	s.opts.ReserveTimeout = 10 * time.Second
	again, err := s.Reserve(context.Background(), req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Receipt, again.Receipt, "the reservation committed is the one answered")
}

// TestTakeRefusesACallWithTooLittleTimeLeft: a call with less time left than
// two batches as long as they take now is refused alone, definitely,
// instead of joining a batch it would cut short for all the others.
func TestTakeRefusesACallWithTooLittleTimeLeft(t *testing.T) {
	t.Parallel()
	co := &coalescer{store: &Store{opts: Options{MaxBatch: 64, BatchesInFlight: 1}}, sales: map[string]*saleQueue{}}
	old, young := newCall("s", "old", "k", 1), newCall("s", "young", "k", 1)
	old.deadline = time.Now().Add(time.Second)
	q := &saleQueue{waiting: []*call{old, young}, batchTime: 800 * time.Millisecond}
	co.sales["s"] = q
	co.mu.Lock()
	batch := co.take("s", q)
	co.mu.Unlock()
	require.Equal(t, []*call{young}, batch)
	<-old.done
	require.ErrorIs(t, old.err, flashline.ErrOverloaded)
}
