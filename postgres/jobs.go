package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

var _ flashline.JobStore = (*Store)(nil)

// ExpireDue expires up to batchSize pending reservations whose time is up and
// returns their units to stock, once each (see ReservationsExpireDue). Any
// number of callers may run it at once over the same rows.
// Sweeps are serialised (SweepTryLock): a caller that finds another sweep
// running returns nothing.
func (s *Store) ExpireDue(ctx context.Context, batchSize int) ([]flashline.Expired, error) {
	var rows []dbsqlc.ReservationsExpireDueRow
	err := withTx(ctx, s.jobs, func(q *dbsqlc.Queries) error {
		locked, err := q.SweepTryLock(ctx)
		if err != nil || !locked {
			return err
		}
		rows, err = q.ReservationsExpireDue(ctx, dbsqlc.ReservationsExpireDueParams{BatchSize: int32(batchSize)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire due reservations: %w", translate(err))
	}
	out := make([]flashline.Expired, len(rows))
	for i, r := range rows {
		out[i] = flashline.Expired{ReservationID: r.ReservationID, SaleID: r.SaleID, Quantity: int(r.Quantity)}
	}
	return out, nil
}

// SweepOverdue is how far past its expiry the oldest pending hold is (0:
// none): the sweeper's lag.
func (s *Store) SweepOverdue(ctx context.Context) (time.Duration, error) {
	secs, err := dbsqlc.New(s.admin).SweepOverdue(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep overdue: %w", translate(err))
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// CheckInvariants checks available + pending + confirmed == initial (summed
// over buckets) and ledger == available for every sale still selling or
// holding reservations, or only saleID when it is not empty. A sale that fails
// is paused and, the first time, gets an incident.
//
// The counts come from one statement (the sale_invariant view), so they are
// one consistent snapshot: a reservation is in all of its tables or in none.
// It runs on the jobs' pool; an admin's resume checks on the admin pool.
func (s *Store) CheckInvariants(ctx context.Context, saleID string) ([]flashline.InvariantResult, error) {
	return s.checkInvariants(ctx, s.jobs, saleID)
}

func (s *Store) checkInvariants(ctx context.Context, pool *db, saleID string) ([]flashline.InvariantResult, error) {
	var filter *string
	if saleID != "" {
		filter = &saleID
	}
	rows, err := dbsqlc.New(pool).InvariantCheck(ctx, dbsqlc.InvariantCheckParams{SaleID: filter})
	if err != nil {
		return nil, fmt.Errorf("check invariants: %w", translate(err))
	}
	results := make([]flashline.InvariantResult, 0, len(rows))
	for _, r := range rows {
		res := flashline.InvariantResult{
			SaleID:       r.SaleID,
			State:        flashline.SaleState(r.State),
			Opened:       r.Opened,
			OK:           r.Ok != nil && *r.Ok,
			InitialStock: int(r.InitialStock),
			Available:    int(r.Available),
			Pending:      int(r.Pending),
			Confirmed:    int(r.Confirmed),
			LedgerTotal:  int(r.LedgerTotal),
		}
		if !res.OK {
			res.Detail = mismatchDetail(res.Available, res.Pending, res.Confirmed, res.InitialStock, res.LedgerTotal)
		}
		// Each variant's stock adds up on its own too (none for a sale
		// without variants): the first that does not is named.
		variants, err := dbsqlc.New(pool).VariantInvariants(ctx, dbsqlc.VariantInvariantsParams{SaleID: r.SaleID})
		if err != nil {
			return results, fmt.Errorf("check invariants: variants of sale %s: %w", r.SaleID, translate(err))
		}
		named := false
		for _, v := range variants {
			ok := v.Ok != nil && *v.Ok
			res.Variants = append(res.Variants, flashline.VariantCheck{SKU: v.Sku, OK: ok,
				Available: int(v.Available), Pending: int(v.Pending), Confirmed: int(v.Confirmed)})
			if ok || named {
				continue
			}
			named = true
			detail := "variant " + v.Sku + ": " + mismatchDetail(int(v.Available), int(v.Pending), int(v.Confirmed), int(v.InitialStock), int(v.LedgerTotal))
			if res.OK {
				res.Detail = detail
			} else {
				res.Detail += "; " + detail
			}
			res.OK = false
		}
		if err := s.recordInvariant(ctx, pool, &res); err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

// mismatchDetail says, for people, how a sale's stock fails to add up.
func mismatchDetail(available, pending, confirmed, initial, ledger int) string {
	return fmt.Sprintf("available %d + pending %d + confirmed %d = %d, initial stock %d; ledger total %d",
		available, pending, confirmed, available+pending+confirmed, initial, ledger)
}

func (s *Store) recordInvariant(ctx context.Context, pool *db, res *flashline.InvariantResult) error {
	err := withTx(ctx, pool, func(q *dbsqlc.Queries) error {
		if err := q.SaleLockForVerdict(ctx, dbsqlc.SaleLockForVerdictParams{SaleID: res.SaleID}); err != nil {
			return err
		}
		prevOK, err := q.InvariantStatusUpsert(ctx, dbsqlc.InvariantStatusUpsertParams{SaleID: res.SaleID, Ok: res.OK, Detail: res.Detail})
		if err != nil || res.OK {
			return err
		}
		reason := "invariant mismatch: " + res.Detail
		if err := q.SalePauseForIncident(ctx, dbsqlc.SalePauseForIncidentParams{PauseReason: &reason, SaleID: res.SaleID}); err != nil {
			return err
		}
		if !prevOK {
			return nil // already recorded and paused
		}
		res.NewIncident = true
		return q.IncidentInsert(ctx, dbsqlc.IncidentInsertParams{
			SaleID:       res.SaleID,
			Kind:         "invariant_mismatch",
			Detail:       res.Detail,
			InitialStock: int32(res.InitialStock),
			Available:    int64(res.Available),
			Pending:      int64(res.Pending),
			Confirmed:    int64(res.Confirmed),
			LedgerTotal:  int64(res.LedgerTotal),
		})
	})
	if err != nil {
		return fmt.Errorf("record invariant of sale %s: %w", res.SaleID, translate(err))
	}
	return nil
}

// PruneIdempotencyKeys deletes idempotency keys older than retentionSeconds,
// batchSize at a time, and returns how many it deleted.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, retentionSeconds, batchSize int) (int64, error) {
	var total int64
	q := dbsqlc.New(s.jobs)
	for {
		n, err := q.IdempotencyKeysPrune(ctx, dbsqlc.IdempotencyKeysPruneParams{RetentionSeconds: int32(retentionSeconds), BatchSize: int32(batchSize)})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune idempotency keys: %w", translate(err))
		}
		if n < int64(batchSize) {
			return total, nil
		}
	}
}

// SaleCounts is one line of the sale_invariant view: a sale's units by
// state, and whether they add up.
type SaleCounts struct {
	SaleID string
	// State is the state the API shows (flashline.EffectiveState): open
	// once a scheduled sale's time has come, sold_out when an open sale has
	// nothing available.
	State                         flashline.SaleState
	InitialStock                  int
	Available, Pending, Confirmed int
	Expired, Cancelled, Voided    int
	LedgerTotal                   int
	OK                            bool
	// Variants: each variant's own (none for a sale without variants).
	Variants []VariantCounts
}

// VariantCounts is one variant's row of the sale_variant_invariant view.
type VariantCounts struct {
	SKU                           string
	InitialStock                  int
	Available, Pending, Confirmed int
	LedgerTotal                   int
	OK                            bool
}

// SaleInvariants reads the sale_invariant view for every sale, and the
// sale_variant_invariant view for each one's variants, for a person to read
// (`flashline check`); it changes nothing (the invariant job is what
// pauses a sale).
func (s *Store) SaleInvariants(ctx context.Context) ([]SaleCounts, error) {
	rows, err := dbsqlc.New(s.admin).SaleInvariantAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("sale invariants: %w", translate(err))
	}
	out := make([]SaleCounts, len(rows))
	for i, r := range rows {
		out[i] = SaleCounts{
			SaleID:       r.SaleID,
			State:        flashline.EffectiveState(flashline.SaleState(r.State), r.OpensAt, r.Now, int(r.Available)),
			InitialStock: int(r.InitialStock),
			Available:    int(r.Available), Pending: int(r.Pending), Confirmed: int(r.Confirmed),
			Expired: int(r.Expired), Cancelled: int(r.Cancelled), Voided: int(r.Voided), LedgerTotal: int(r.LedgerTotal),
			OK: r.Ok != nil && *r.Ok,
		}
	}
	variants, err := dbsqlc.New(s.admin).VariantInvariantAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("sale invariants: variants: %w", translate(err))
	}
	at := make(map[string]int, len(out))
	for i, c := range out {
		at[c.SaleID] = i
	}
	for _, v := range variants {
		i, ok := at[v.SaleID]
		if !ok {
			continue // a sale made between the two reads
		}
		out[i].Variants = append(out[i].Variants, VariantCounts{SKU: v.Sku, InitialStock: int(v.InitialStock),
			Available: int(v.Available), Pending: int(v.Pending), Confirmed: int(v.Confirmed),
			LedgerTotal: int(v.LedgerTotal), OK: v.Ok != nil && *v.Ok})
	}
	return out, nil
}
