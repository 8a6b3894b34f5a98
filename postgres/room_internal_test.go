package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
	"github.com/flashline/flashline/internal/testkit/testdb"
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

// TestFreezeCountsEdgeTicketsWrittenMeanwhile: an origin's write of its
// edges' pre-open tickets and holders still under way (uncommitted) when the
// first lease after the open freezes the crowd is counted by the freeze,
// which waits for it; one that comes after the freeze writes nothing. Found
// by the rehearsal on Locust: the freeze and the write at the open
// overlapped, each missed the other, and a crowd of 2,379 tickets through an
// edge was frozen at 0 (every ticket ranked first, and 2,853 admitted for
// 300 units). The crowd's N is now the holders the freeze commits (issue
// 48), so the write under way carries holders, and N is theirs.
func TestFreezeCountsEdgeTicketsWrittenMeanwhile(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	store := NewStore(SinglePool(pool), Options{})
	opens := time.Now().Add(time.Hour)
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_freeze", InitialStock: 10,
		Admission: flashline.AdmissionWaitingRoom, OpensAt: &opens})
	require.NoError(t, err)
	// The write under way: edge-1's 2,379 tickets, not committed yet.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	require.NoError(t, dbsqlc.New(tx).WaitroomEdgeTickets(ctx, dbsqlc.WaitroomEdgeTicketsParams{
		SaleID: sale.ID, Edges: []string{"edge-1"}, Tickets: []int64{2379}}))
	holders := make([]string, 2379)
	for i := range holders {
		holders[i] = fmt.Sprintf("cus_edge_%d", i)
	}
	open, err := dbsqlc.New(tx).WaitroomAddHolders(ctx, dbsqlc.WaitroomAddHoldersParams{SaleID: sale.ID, Customers: holders})
	require.NoError(t, err)
	require.True(t, open)
	// The open came a second ago (by the database's clock).
	_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = now() - interval '1 second' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)

	leased := make(chan error, 1)
	go func() {
		_, _, err := store.LeasePositions(ctx, sale.ID, 1, 0)
		leased <- err
	}()
	select {
	case err := <-leased:
		t.Fatalf("the freezing lease did not wait for the write under way (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-leased)
	var frozen *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_count FROM waiting_rooms WHERE sale_id = $1`, sale.ID).Scan(&frozen))
	require.NotNil(t, frozen, "the lease froze the crowd")
	require.EqualValues(t, 2379, *frozen)

	// A write after the freeze changes nothing.
	require.NoError(t, store.RecordEdgeTickets(ctx, sale.ID, map[string]int64{"edge-1": 5000, "edge-2": 7}))
	var edges int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(tickets) FROM waitroom_edge_tickets WHERE sale_id = $1`, sale.ID).Scan(&edges))
	require.EqualValues(t, 2379, edges)
	open, err = dbsqlc.New(pool).WaitroomAddHolders(ctx, dbsqlc.WaitroomAddHoldersParams{SaleID: sale.ID, Customers: []string{"cus_late"}})
	require.NoError(t, err)
	require.False(t, open, "the crowd is frozen")
	var listed int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM waitroom_holders WHERE sale_id = $1`, sale.ID).Scan(&listed))
	require.EqualValues(t, 2379, listed)
}
