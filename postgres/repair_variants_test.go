package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestRepairRefusesASaleWithVariants: a repair plans each bucket's opening
// stock from the sale's initial stock, which a sale with variants spreads by
// variant: it is refused, and nothing is written.
func TestRepairRefusesASaleWithVariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "drop_1", PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		Variants: []flashline.NewVariant{{SKU: "S", Stock: 3}, {SKU: "M", Stock: 5, Buckets: 2}}})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sales SET state = 'paused' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)

	for _, apply := range []bool{false, true} {
		_, err = s.Repair(ctx, sale.ID, "ops@example.com", apply)
		require.ErrorIs(t, err, flashline.ErrInvalidTransition)
		require.ErrorContains(t, err, "with variants")
	}
	var repairs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM stock_ledger WHERE sale_id = $1 AND reason = 'repair'`, sale.ID).Scan(&repairs))
	require.Zero(t, repairs)
}
