package gate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
)

// TestGateRelaySetsAsideAMovementWithoutVariant: in a gated sale with
// variants, a movement owed without a variant (as an instance of the
// version before migration 000028 writes a return during a rolling
// upgrade) goes to no counter the sale has: the relay sets it aside and
// reports it once (an incident naming it), it stays owed, and the sale's
// later movements still reach their counters (a restock without a variant
// too: its variant is its reservation's).
func TestGateRelaySetsAsideAMovementWithoutVariant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.variantSale(t, 2, flashline.NewVariant{SKU: "S", Stock: 3}, flashline.NewVariant{SKU: "M", Stock: 3})

	old := "return:" + sale.ID + ":999"
	_, err := f.pool.Exec(ctx, `INSERT INTO gate_outbox (movement_id, sale_id, customer_id, quantity, reason, gate_seq, created_at)
		VALUES ($1, $2, 'cust_old', 1, 'return', 999, now() - interval '1 minute')`, old, sale.ID)
	require.NoError(t, err)

	// A later movement of the same sale: a hold of M cancelled (a restock).
	res, err := f.store.Reserve(ctx, variantReq(sale.ID, "M", "cust_a", "k", 1))
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"S": 3, "M": 2}, f.variantCounters(t, sale))
	_, err = f.pg.Cancel(ctx, res.Reservation.ID, flashline.Actor{CustomerID: "cust_a"})
	require.NoError(t, err)

	// A restock of S written without a variant: resolved from its
	// reservation's bucket where the relay reads it.
	resS, err := f.store.Reserve(ctx, variantReq(sale.ID, "S", "cust_b", "k", 1))
	require.NoError(t, err)
	_, err = f.pg.Cancel(ctx, resS.Reservation.ID, flashline.Actor{CustomerID: "cust_b"})
	require.NoError(t, err)
	tag, err := f.pool.Exec(ctx, `UPDATE gate_outbox SET variant = NULL WHERE movement_id = $1`, "restock:"+resS.Reservation.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	for range 2 {
		_, err = f.g.Relay(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, map[string]int64{"S": 3, "M": 3}, f.variantCounters(t, sale), "the restocks reached M's and S's counters")
	var owed []string
	rows, err := f.pool.Query(ctx, "SELECT movement_id FROM gate_outbox WHERE sale_id = $1 AND applied_at IS NULL", sale.ID)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		owed = append(owed, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{old}, owed, "only the movement set aside is still owed")
	require.Equal(t, []string{"gate_movement_set_aside"}, incidents(t, f.pool, sale.ID), "reported once")
	require.Contains(t, lastIncidentDetail(t, f, sale.ID), old)
	// The gate's check does not drop it: its detail names it.
	require.Contains(t, gate.ViewDetail(t.Context(), f.g, sale.ID), old+" ×1 (no variant: set aside by the relay)")
}
