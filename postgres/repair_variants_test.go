package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/postgres"
)

type repairRow struct {
	Bucket   int
	Delta    int
	Operator string
	Recorded bool // records an earlier change (no xact of its own)
}

func repairRows(t *testing.T, pool *pgxpool.Pool, saleID string) []repairRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT bucket, delta, operator, xact_id IS NULL FROM stock_ledger
		WHERE sale_id = $1 AND reason = 'repair' ORDER BY entry_id`, saleID)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[repairRow])
	require.NoError(t, err)
	return got
}

// corruptAndPause changes a stock row as a second write path would, and lets
// the invariant check find it and pause the sale.
func corruptAndPause(t *testing.T, s *postgres.Store, pool *pgxpool.Pool, saleID string, bucket, delta int) flashline.InvariantResult {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE stock SET quantity = quantity + $3 WHERE sale_id = $1 AND bucket = $2`, saleID, bucket, delta)
	require.NoError(t, err)
	res, err := s.CheckInvariants(ctx, saleID)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.False(t, res[0].OK)
	sale, err := s.Sale(ctx, saleID)
	require.NoError(t, err)
	require.Equal(t, flashline.StatePaused, sale.State, "paused by the invariant check")
	return res[0]
}

// TestRepairOfASaleWithVariants: one variant's stock row changed from psql
// breaks that variant's invariant and pauses the sale; the repair plan
// names each bucket's variant, reads each bucket's opening as its share of
// its variant's stock and its reservations and ledger as its own, and
// corrects only the bucket changed; with apply it writes the two 'repair'
// ledger rows of that bucket and nothing for the other variants, the sale
// stays paused, the invariant (each variant's too) holds again, and the
// sale resumes.
func TestRepairOfASaleWithVariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "drop_1", PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		Confirmation: flashline.ConfirmByCustomer,
		Variants:     []flashline.NewVariant{{SKU: "S", Stock: 3}, {SKU: "M", Stock: 5, Buckets: 2}, {SKU: "L", Stock: 4}}})
	require.NoError(t, err)
	for _, r := range []struct{ customer, variant string }{{"alice", "S"}, {"bob", "M"}, {"carol", "M"}, {"dave", "L"}} {
		req := reserveReq(sale.ID, r.customer, "k", 1)
		req.Variant = r.variant
		req.Fingerprint = append(req.Fingerprint, "/"+r.variant...)
		res, err := s.Reserve(ctx, req)
		require.NoError(t, err)
		if r.customer == "dave" {
			_, err = s.Confirm(ctx, res.Reservation.ID, flashline.Actor{CustomerID: "dave"})
			require.NoError(t, err)
		}
	}

	// M's second row (bucket 64+1) gains two units no ledger row records.
	inv := corruptAndPause(t, s, pool, sale.ID, 65, 2)
	require.Contains(t, inv.Detail, "variant M:")

	plan, err := s.Repair(ctx, sale.ID, "ops@example.com", false)
	require.NoError(t, err)
	require.True(t, plan.Needed())
	require.False(t, plan.Applied)
	type line struct {
		Bucket                    int
		Variant                   string
		Opening, Held, Unrecorded int
		Correction                int
	}
	var got []line
	for _, b := range plan.Buckets {
		got = append(got, line{b.Bucket, b.Variant, b.Opening, b.Held, b.Unrecorded(), b.Correction()})
		require.Equal(t, b.Opening-b.Held, b.Implied)
	}
	heldM64 := plan.Buckets[1].Held // the coalescer picks the buckets of bob's and carol's units
	require.Equal(t, []line{
		{0, "S", 3, 1, 0, 0},
		{64, "M", 3, heldM64, 0, 0},
		{65, "M", 2, 2 - heldM64, 2, -2},
		{128, "L", 4, 1, 0, 0},
	}, got)
	totals := plan.VariantTotals()
	require.Len(t, totals, 3)
	for i, want := range []struct {
		sku                    string
		opening, stock, ledger int
	}{{"S", 3, 2, 2}, {"M", 5, 5, 3}, {"L", 4, 3, 3}} {
		require.Equal(t, want.sku, totals[i].Variant)
		require.Equal(t, -1, totals[i].Bucket)
		require.Equal(t, want.opening, totals[i].Opening, want.sku)
		require.Equal(t, want.stock, totals[i].Stock, want.sku)
		require.Equal(t, want.ledger, totals[i].Ledger, want.sku)
	}
	require.Empty(t, repairRows(t, pool, sale.ID), "the plan writes nothing")

	plan, err = s.Repair(ctx, sale.ID, "ops@example.com", true)
	require.NoError(t, err)
	require.True(t, plan.Applied)
	require.Equal(t, []repairRow{{65, 2, "ops@example.com", true}, {65, -2, "ops@example.com", false}}, repairRows(t, pool, sale.ID))
	var detail string
	require.NoError(t, pool.QueryRow(ctx, `SELECT detail FROM operator_actions WHERE action = 'repair' AND sale_id = $1`, sale.ID).Scan(&detail))
	require.Contains(t, detail, "variant M: stock 5 -> 3")
	require.NotContains(t, detail, "variant S")

	res, err := s.CheckInvariants(ctx, sale.ID)
	require.NoError(t, err)
	require.True(t, res[0].OK, "%+v", res[0])
	for _, v := range res[0].Variants {
		require.True(t, v.OK, "variant %s", v.SKU)
	}
	after, err := s.Sale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, flashline.StatePaused, after.State, "a repair never resumes")
	plan, err = s.Repair(ctx, sale.ID, "ops@example.com", true)
	require.NoError(t, err)
	require.False(t, plan.Needed())
	require.False(t, plan.Applied)
	resumed, err := s.SetSaleState(flashline.WithOperator(ctx, "ops@example.com"), sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	require.Equal(t, flashline.StateOpen, resumed.State)
	requireInvariant(t, s, sale.ID)
}

// TestRepairOfASaleWithoutVariants: a sale without variants is planned and
// repaired as before variants could be: each bucket's opening its share of
// the sale's initial stock, no variant named, no variants' totals.
func TestRepairOfASaleWithoutVariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "sku_plain", InitialStock: 10, Buckets: 3, PerCustomerLimit: 1, ReservationTTLSeconds: 600})
	require.NoError(t, err)
	for _, c := range []string{"alice", "bob"} {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, c, "k", 1))
		require.NoError(t, err)
	}
	corruptAndPause(t, s, pool, sale.ID, 1, -1)

	plan, err := s.Repair(ctx, sale.ID, "ops@example.com", true)
	require.NoError(t, err)
	require.True(t, plan.Applied)
	openings := []int{}
	for _, b := range plan.Buckets {
		require.Empty(t, b.Variant)
		openings = append(openings, b.Opening)
	}
	require.Equal(t, []int{4, 3, 3}, openings)
	require.Nil(t, plan.VariantTotals())
	t1 := plan.Total()
	require.Equal(t, 7, t1.Stock)
	require.Equal(t, 8, t1.Implied)
	require.Equal(t, []repairRow{{1, -1, "ops@example.com", true}, {1, 1, "ops@example.com", false}}, repairRows(t, pool, sale.ID))
	var detail string
	require.NoError(t, pool.QueryRow(ctx, `SELECT detail FROM operator_actions WHERE action = 'repair' AND sale_id = $1`, sale.ID).Scan(&detail))
	require.Equal(t, "stock 7 -> 8 (reservations imply 8, ledger said 8)", detail)
	res, err := s.CheckInvariants(ctx, sale.ID)
	require.NoError(t, err)
	require.True(t, res[0].OK, "%+v", res[0])
}
