package postgres

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testdb"
)

// TestWatermarkMonotonicWithTwoPacers runs two pacers at once, as if two
// instances both believed they led (no leader's lock), each on its own
// session, reading the rooms and advancing their watermarks as fast as they
// can, plus a third writer trying to set the watermark back. Observed from
// outside, the watermark never decreases, and it ends at the highest value
// anyone set.
func TestWatermarkMonotonicWithTwoPacers(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	store := NewStore(SinglePool(pool), Options{})
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_race", InitialStock: 1_000_000, Admission: flashline.AdmissionWaitingRoom})
	require.NoError(t, err)
	_, err = store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	// Plenty of waiters to admit.
	_, err = pool.Exec(ctx, `UPDATE waiting_rooms SET next_position = 1000000000 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)

	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	var advances atomic.Int64
	for i := range 2 {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(conn.Release)
		db := pacerDB{conn: conn}
		wg.Go(func() {
			for time.Now().Before(deadline) {
				rows, err := db.PaceInputs(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				for _, row := range rows {
					if _, _, err := db.Advance(ctx, row.SaleID, row.AdmittedThrough+int64(1+i+rand.IntN(50)), 1); err != nil {
						t.Error(err)
						return
					}
					advances.Add(1)
				}
			}
		})
	}
	var highestAttempt atomic.Int64
	wg.Go(func() {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Release()
		db := pacerDB{conn: conn}
		for time.Now().Before(deadline) {
			target := rand.Int64N(5000)
			highestAttempt.Store(max(highestAttempt.Load(), target))
			if _, _, err := db.Advance(ctx, sale.ID, target, 1); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var observed []int64
	wg.Go(func() {
		for time.Now().Before(deadline) {
			var w int64
			if err := pool.QueryRow(ctx, `SELECT admitted_through FROM waiting_rooms WHERE sale_id = $1`, sale.ID).Scan(&w); err != nil {
				t.Error(err)
				return
			}
			observed = append(observed, w)
		}
	})
	wg.Wait()
	require.NotEmpty(t, observed)
	for i := 1; i < len(observed); i++ {
		require.GreaterOrEqual(t, observed[i], observed[i-1], "the watermark went back")
	}
	var final int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT admitted_through FROM waiting_rooms WHERE sale_id = $1`, sale.ID).Scan(&final))
	require.GreaterOrEqual(t, final, highestAttempt.Load())
	require.Positive(t, final)
	t.Logf("%d advances by two pacers, %d observations, final watermark %d", advances.Load(), len(observed), final)
}
