package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// What the Redis gate needs of the database (flashline.GateStore), on the
// purchase path's pool: returns and the relay are part of selling.

var _ flashline.GateStore = (*Store)(nil)

// ReturnUnit gives a gate unit back under the customer's lock: the purchase
// path holds the same lock while it may reserve with the unit, so exactly
// one of the two wins (see GateReturn and ReserveBatchCommit).
func (s *Store) ReturnUnit(ctx context.Context, u flashline.GateUnit) (bool, error) {
	var returned bool
	err := withTx(ctx, s.sale, func(q *dbsqlc.Queries) error {
		if err := q.GateLockCustomer(ctx, dbsqlc.GateLockCustomerParams{CustomerID: u.CustomerID}); err != nil {
			return err
		}
		var err error
		returned, err = q.GateReturn(ctx, dbsqlc.GateReturnParams{
			SaleID: u.SaleID, GateSeq: u.Seq, CustomerID: u.CustomerID, Quantity: int32(u.Quantity), Variant: u.Variant,
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("return gate unit %d of sale %s: %w", u.Seq, u.SaleID, translate(err))
	}
	return returned, nil
}

// Settlements says which of the units a reservation holds and which were
// returned.
func (s *Store) Settlements(ctx context.Context, saleID string, seqs []int64) (map[int64]flashline.GateSettlement, error) {
	rows, err := dbsqlc.New(s.sale).GateSettlements(ctx, dbsqlc.GateSettlementsParams{SaleID: saleID, Seqs: seqs})
	if err != nil {
		return nil, fmt.Errorf("gate settlements of sale %s: %w", saleID, translate(err))
	}
	out := make(map[int64]flashline.GateSettlement, len(rows))
	for _, r := range rows {
		out[r.Seq] = flashline.GateSettlement{Reserved: r.Reserved, Returned: r.Returned}
	}
	return out, nil
}

// RelayOwed takes up to n movements owed to gates (FOR UPDATE SKIP LOCKED:
// concurrent relays take different ones) and marks applied those apply
// applied, in one transaction. A relay that dies after applying and before
// committing leaves them owed: applying them again is a no-op in Redis,
// which records every movement id it applied.
func (s *Store) RelayOwed(ctx context.Context, n int, skip, setAside []string, apply func(context.Context, []flashline.GateMovement) ([]string, error)) (int, error) {
	var taken int
	err := withTx(ctx, s.sale, func(q *dbsqlc.Queries) error {
		rows, err := q.GateOutboxTake(ctx, dbsqlc.GateOutboxTakeParams{BatchSize: int32(n), SkipSales: append([]string{}, skip...),
			SkipMovements: append([]string{}, setAside...)})
		if err != nil || len(rows) == 0 {
			return err
		}
		taken = len(rows)
		moves := make([]flashline.GateMovement, len(rows))
		for i, r := range rows {
			moves[i] = flashline.GateMovement{ID: r.MovementID, SaleID: r.SaleID, CustomerID: r.CustomerID, Quantity: int(r.Quantity), Variant: r.Variant,
				HasVariants: r.HasVariants}
			if r.GateSeq != nil {
				moves[i].Seq = *r.GateSeq
			}
		}
		applied, applyErr := apply(ctx, moves)
		if len(applied) > 0 {
			if err := q.GateOutboxMarkApplied(ctx, dbsqlc.GateOutboxMarkAppliedParams{MovementIds: applied}); err != nil {
				return errors.Join(applyErr, err)
			}
		}
		// What was applied is marked even when the rest failed.
		if applyErr != nil && len(applied) == 0 {
			return applyErr
		}
		return nil
	})
	if err != nil {
		return taken, fmt.Errorf("relay gate movements: %w", translate(err))
	}
	return taken, nil
}

// GateLedger reads what a gated sale's counter should account for.
func (s *Store) GateLedger(ctx context.Context, saleID string) (flashline.GateLedger, error) {
	r, err := dbsqlc.New(s.sale).GateLedger(ctx, dbsqlc.GateLedgerParams{SaleID: saleID})
	if err != nil {
		return flashline.GateLedger{}, fmt.Errorf("gate ledger of sale %s: %w", saleID, translate(err))
	}
	l := flashline.GateLedger{Available: r.Available, OwedAge: time.Duration(r.OwedAgeSeconds * float64(time.Second)), Epoch: r.Epoch}
	for i, id := range r.OwedIds {
		l.OwedMovements = append(l.OwedMovements, flashline.GateMovement{ID: id, SaleID: saleID, Quantity: int(r.OwedQuantities[i]), Variant: r.OwedVariants[i]})
		l.Owed += int64(r.OwedQuantities[i])
	}
	for i, sku := range r.VariantSkus {
		l.Variants = append(l.Variants, flashline.GateVariantUnits{SKU: sku, Units: r.VariantAvailable[i]})
	}
	// The owed movements are in the version: a relay's marking changes
	// which are owed, not always how many units.
	l.Version = fmt.Sprintf("epoch %d; stock %s; returns %d; owed %s", r.Epoch, r.StockVersion, r.Returns, strings.Join(r.OwedIds, ","))
	return l, nil
}

// StoredAnswer is the stored answer to the request's idempotency key, to
// replay (stored false: none), without reserving anything; a key stored for
// another request is ErrIdempotencyKeyReused, as the purchase path says.
func (s *Store) StoredAnswer(ctx context.Context, req flashline.ReserveRequest) (flashline.ReserveResult, bool, error) {
	if req.IdempotencyKey == "" {
		return flashline.ReserveResult{}, false, nil
	}
	r, err := dbsqlc.New(s.sale).GateStoredAnswer(ctx, dbsqlc.GateStoredAnswerParams{CustomerID: req.CustomerID, Key: req.IdempotencyKey})
	switch {
	case notFound(err):
		return flashline.ReserveResult{}, false, nil
	case err != nil:
		return flashline.ReserveResult{}, false, fmt.Errorf("stored answer of %s's key: %w", req.CustomerID, translate(err))
	case !bytes.Equal(r.RequestHash, req.Fingerprint):
		return flashline.ReserveResult{}, true, flashline.ErrIdempotencyKeyReused
	}
	return flashline.ReserveResult{Receipt: storedReceipt(r.ResponseBody, r.StoredReservationID,
		r.StoredSaleID, r.StoredQuantity, req.Variant, r.StoredExpiresAt), Replayed: true}, true, nil
}

// OwedToCustomer is how many units of the customer are owed back to a gated
// sale's counter and not applied yet, and whether the customer holds an
// active (pending or confirmed) reservation of the sale, in one statement.
func (s *Store) OwedToCustomer(ctx context.Context, saleID, customerID string) (int64, bool, error) {
	// A buyer's request waits for it: bounded as a reservation's attempt
	// is (the request's context has no deadline).
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReserveTimeout)
	defer cancel()
	r, err := dbsqlc.New(s.sale).GateOwedToCustomer(ctx, dbsqlc.GateOwedToCustomerParams{SaleID: saleID, CustomerID: customerID})
	if err != nil {
		return 0, false, fmt.Errorf("units owed to the gate of sale %s for %s: %w", saleID, customerID, translate(err))
	}
	return r.Owed, r.Holds, nil
}

// GatedSales lists the gated sales the gate job looks after.
func (s *Store) GatedSales(ctx context.Context) ([]flashline.GatedSale, error) {
	rows, err := dbsqlc.New(s.admin).GatedSales(ctx)
	if err != nil {
		return nil, fmt.Errorf("gated sales: %w", translate(err))
	}
	out := make([]flashline.GatedSale, len(rows))
	for i, r := range rows {
		out[i] = flashline.GatedSale{ID: r.SaleID, State: flashline.SaleState(r.State), CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// Incident records an incident of a sale's gate, pausing the sale with pause.
func (s *Store) Incident(ctx context.Context, saleID, kind, detail string, pause bool) (bool, error) {
	paused, err := dbsqlc.New(s.admin).GateIncident(ctx, dbsqlc.GateIncidentParams{
		SaleID: saleID, Kind: kind, Detail: detail, Pause: pause, Reason: "gate: " + detail,
	})
	if err != nil {
		return false, fmt.Errorf("gate incident of sale %s: %w", saleID, translate(err))
	}
	return paused, nil
}

// LockRebuild takes the sale's rebuild lock (GateRebuildTryLock) on a
// connection of the session pool (never through a transaction pooler),
// kept until unlock: two rebuilds of a sale at once would each write a
// counter, and only one may stand.
func (s *Store) LockRebuild(ctx context.Context, saleID string) (func(), error) {
	conn, err := s.session.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("rebuild gate of sale %s: lock: %w", saleID, translate(err))
	}
	locked, err := dbsqlc.New(conn).GateRebuildTryLock(ctx, dbsqlc.GateRebuildTryLockParams{SaleID: saleID})
	switch {
	case err != nil:
		destroy(conn)
		return nil, fmt.Errorf("rebuild gate of sale %s: lock: %w", saleID, translate(err))
	case !locked:
		conn.Release()
		return nil, fmt.Errorf("rebuild gate of sale %s: %w", saleID, flashline.ErrRebuildRunning)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := dbsqlc.New(conn).GateRebuildUnlock(ctx, dbsqlc.GateRebuildUnlockParams{SaleID: saleID}); err != nil {
			destroy(conn) // the session may still hold the lock: end it
			return
		}
		conn.Release()
	}, nil
}

// BeginRebuild starts a rebuild of a paused gated sale's counter, in one
// transaction: a new epoch (the sale row's lock orders it against batches
// committing gated reservations and against returns), then, in one snapshot
// taken once that lock is held, the units owed to the old counter settled
// (the new one is computed from this database, so it counts them already)
// and the new counter with the holds it is made of.
func (s *Store) BeginRebuild(ctx context.Context, saleID string) (flashline.GateRebuild, error) {
	var rb flashline.GateRebuild
	err := withTx(ctx, s.admin, func(q *dbsqlc.Queries) error {
		epoch, err := q.GateNextEpoch(ctx, dbsqlc.GateNextEpochParams{SaleID: saleID})
		if notFound(err) {
			sale, err := s.Sale(ctx, saleID)
			switch {
			case err != nil:
				return err
			case sale.Gate != flashline.GateRedis:
				return fmt.Errorf("sale %s has no gate: %w", saleID, flashline.ErrNotFound)
			}
			return fmt.Errorf("rebuild the gate of sale %s (%s): pause it first: %w", saleID, sale.State, flashline.ErrInvalidTransition)
		}
		if err != nil {
			return err
		}
		rb.Epoch = int64(epoch)
		// The settling, the counting and the holds in one statement: one
		// snapshot, taken once the epoch's row lock is held (see
		// GateRebuildSettle).
		r, err := q.GateRebuildSettle(ctx, dbsqlc.GateRebuildSettleParams{SaleID: saleID})
		if err != nil {
			return err
		}
		rb.Counter, rb.Settled = r.Counter, int(r.Settled)
		for i := range r.HoldSeqs {
			rb.Holds = append(rb.Holds, flashline.GateHold{CustomerID: r.HoldCustomers[i], IdempotencyKey: r.HoldKeys[i], Quantity: int(r.HoldQuantities[i]), Seq: r.HoldSeqs[i]})
		}
		for i, sku := range r.VariantSkus {
			rb.Variants = append(rb.Variants, flashline.GateVariantUnits{SKU: sku, Units: r.VariantCounters[i]})
		}
		return nil
	})
	if err != nil {
		return flashline.GateRebuild{}, fmt.Errorf("rebuild gate of sale %s: %w", saleID, translate(err))
	}
	return rb, nil
}
