package postgres

import (
	"context"
	"fmt"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// bucketName names a bucket in errors and ledger notes: with its variant in
// a sale with variants.
func bucketName(b flashline.RepairBucket) string {
	if b.Variant == "" {
		return fmt.Sprintf("bucket %d", b.Bucket)
	}
	return fmt.Sprintf("bucket %d (variant %s)", b.Bucket, b.Variant)
}

// oversold is the first bucket whose reservations hold more than it had:
// no stock quantity can make that add up (stock cannot go below zero).
func oversold(p flashline.RepairPlan) (flashline.RepairBucket, bool) {
	for _, b := range p.Buckets {
		if b.Implied < 0 {
			return b, true
		}
	}
	return flashline.RepairBucket{}, false
}

// Repair reads the repair plan of a paused sale and, with apply, writes it
// in one transaction (sql/queries/operations.sql: the sale's row and every
// stock row of the sale are locked first, so the plan cannot change before
// it is written): for each bucket (of each variant, in a sale with
// variants: a bucket's opening is then its variant's share), a 'repair' ledger row recording the
// change no ledger row recorded, the stock set to what the reservations
// imply with a 'repair' ledger row for that, and one operator_actions row,
// all naming operator. It never resumes the sale: the invariant job sees it
// add up, and an admin resumes it (resume checks again).
func (s *Store) Repair(ctx context.Context, saleID, operator string, apply bool) (flashline.RepairPlan, error) {
	if err := flashline.CheckOperator(operator); err != nil {
		return flashline.RepairPlan{}, err
	}
	plan := flashline.RepairPlan{SaleID: saleID, Operator: operator}
	err := withTx(ctx, s.admin, func(q *dbsqlc.Queries) error {
		state, err := q.SaleLockForRepair(ctx, dbsqlc.SaleLockForRepairParams{SaleID: saleID})
		if err != nil {
			return err
		}
		plan.State = flashline.SaleState(state)
		if plan.State != flashline.StatePaused {
			return fmt.Errorf("it is %s; pause it first ('flashline sale pause %s'): %w", state, saleID, flashline.ErrSaleNotPaused)
		}
		if _, err := q.StockLockForRepair(ctx, dbsqlc.StockLockForRepairParams{SaleID: saleID}); err != nil {
			return err
		}
		rows, err := q.RepairPlan(ctx, dbsqlc.RepairPlanParams{SaleID: saleID})
		if err != nil {
			return err
		}
		for _, r := range rows {
			plan.Buckets = append(plan.Buckets, flashline.RepairBucket{
				Bucket: int(r.Bucket), Variant: r.Variant, Stock: int(r.Stock), Opening: int(r.Opening), Held: int(r.Held),
				Implied: int(r.Opening - r.Held), Ledger: int(r.Ledger),
			})
		}
		if b, bad := oversold(plan); bad {
			return fmt.Errorf("%s: its reservations hold %d units of the %d it had (oversold by %d): no stock quantity adds up; void or cancel the excess orders first: %w",
				bucketName(b), b.Held, b.Opening, -b.Implied, flashline.ErrInvariantBroken)
		}
		if !apply || !plan.Needed() {
			return nil
		}
		return writeRepair(ctx, q, &plan)
	})
	if err != nil {
		return plan, fmt.Errorf("repair sale %s: %w", saleID, translate(err))
	}
	return plan, nil
}

func writeRepair(ctx context.Context, q *dbsqlc.Queries, plan *flashline.RepairPlan) error {
	moved := 0
	for _, b := range plan.Buckets {
		if u := b.Unrecorded(); u != 0 {
			if err := q.StockLedgerInsertRepair(ctx, dbsqlc.StockLedgerInsertRepairParams{
				SaleID: plan.SaleID, Bucket: int32(b.Bucket), Delta: int32(u), Operator: plan.Operator,
				Note:      fmt.Sprintf("stock and ledger disagreed by %+d: a change with no ledger row (see stock_audit), recorded by repair", u),
				OwnChange: false,
			}); err != nil {
				return err
			}
		}
		c := b.Correction()
		if c == 0 {
			continue
		}
		n, err := q.StockRepair(ctx, dbsqlc.StockRepairParams{Target: int32(b.Implied), SaleID: plan.SaleID, Bucket: int32(b.Bucket), Expected: int32(b.Stock)})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%s changed under the repair's lock", bucketName(b)) // cannot happen: the row is locked
		}
		if err := q.StockLedgerInsertRepair(ctx, dbsqlc.StockLedgerInsertRepairParams{
			SaleID: plan.SaleID, Bucket: int32(b.Bucket), Delta: int32(c), Operator: plan.Operator,
			Note:      fmt.Sprintf("correction: stock %d -> %d, what the reservations imply (opening %d - held %d)", b.Stock, b.Implied, b.Opening, b.Held),
			OwnChange: true,
		}); err != nil {
			return err
		}
		moved += abs(c)
	}
	t := plan.Total()
	detail := fmt.Sprintf("stock %d -> %d (reservations imply %d, ledger said %d)", t.Stock, t.Implied, t.Implied, t.Ledger)
	for _, v := range plan.VariantTotals() {
		if v.Correction() != 0 || v.Unrecorded() != 0 {
			detail += fmt.Sprintf("; variant %s: stock %d -> %d, ledger said %d", v.Variant, v.Stock, v.Implied, v.Ledger)
		}
	}
	if err := q.OperatorActionInsert(ctx, dbsqlc.OperatorActionInsertParams{
		Action: "repair", SaleID: plan.SaleID, Operator: plan.Operator, Affected: int32(moved),
		Detail: detail,
	}); err != nil {
		return err
	}
	plan.Applied = true
	return nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
