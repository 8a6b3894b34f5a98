package gate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
)

// These tests run a rebuild against movements that commit while it runs.
// They order the two with a side transaction holding a row lock, and wait
// for a backend to be blocked (pg_stat_activity), never for time to pass.

// blockedOn waits until a backend of this test's database waits for a lock
// while running a statement containing fragment, or until done is closed
// (the statement did not wait: the code under test let it through). It
// reports whether the backend was seen waiting.
func blockedOn(t *testing.T, pool *pgxpool.Pool, fragment string, done <-chan struct{}) bool {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return false
		default:
		}
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity
			  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
			fragment).Scan(&n))
		if n > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no backend waited on a lock running %q, and it did not finish", fragment)
	return false
}

func (f *fixture) pause(t *testing.T, saleID string) {
	t.Helper()
	_, err := f.store.SetSaleState(context.Background(), saleID, flashline.ActionPause)
	require.NoError(t, err)
}

// drift relays what is owed and returns the gate's status: after a
// rebuild, nothing is in flight, so a drift that is not 0 stays.
func (f *fixture) drift(t *testing.T, saleID string) flashline.GateStatus {
	t.Helper()
	ctx := context.Background()
	_, err := f.g.Relay(ctx)
	require.NoError(t, err)
	return f.g.Status(ctx, saleID)
}

// TestGateReturnDuringRebuildCountsOnce: a unit of the old epoch given back
// while a rebuild runs is either settled by the rebuild (the return
// committed first) or refused (the rebuild's epoch came first), never both
// counted by the rebuilt counter and relayed to it. GateReturn read the
// epoch without a lock: a return that had read the old epoch and committed
// after the rebuild's settle statement was counted twice, the counter one
// unit above the database (drift -1, the gate job's gate_counter_high).
func TestGateReturnDuringRebuildCountsOnce(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 5, 1)
	// A request took a unit and died; the sale is paused for a rebuild.
	seq, fresh, err := f.g.Step(ctx, req(sale.ID, "cust_r", "k", 1), 1)
	require.NoError(t, err)
	require.True(t, fresh)
	f.pause(t, sale.ID)

	// The return reads the epoch, then waits to insert its row behind a
	// side transaction that holds the same movement id, uncommitted.
	side, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = side.Rollback(context.Background()) })
	_, err = side.Exec(ctx, `INSERT INTO gate_outbox (movement_id, sale_id, customer_id, quantity, reason, gate_seq)
		VALUES ($1, $2, 'cust_r', 1, 'return', $3)`, fmt.Sprintf("return:%s:%d", sale.ID, seq), sale.ID, seq)
	require.NoError(t, err)

	returned := make(chan struct{})
	var returnErr error
	go func() {
		defer close(returned)
		_, returnErr = f.pg.ReturnUnit(ctx, flashline.GateUnit{SaleID: sale.ID, CustomerID: "cust_r", Seq: seq, Quantity: 1})
	}()
	require.True(t, blockedOn(t, f.pool, "INSERT INTO gate_outbox", returned), "the return did not wait for the side transaction")

	// The rebuild runs while the return is under way: it finishes, or
	// waits for the return.
	rebuilt := make(chan struct{})
	var rebuildErr error
	go func() {
		defer close(rebuilt)
		_, rebuildErr = f.g.Rebuild(ctx, sale.ID)
	}()
	blockedOn(t, f.pool, "gate_epoch = gate_epoch + 1", rebuilt)

	require.NoError(t, side.Rollback(ctx))
	<-returned
	<-rebuilt
	require.NoError(t, returnErr)
	require.NoError(t, rebuildErr)
	st := f.drift(t, sale.ID)
	require.True(t, st.OK, "status %+v", st)
	require.EqualValues(t, 5, st.Counter)
}

// TestGateRestockDuringRebuildCountsOnce: a cancel (or an expiry, a void)
// that commits while a rebuild runs is either in the rebuilt counter or
// owed to it, never both. The rebuild settled what was owed in one
// statement and counted the sale in the next, each with its own snapshot
// (READ COMMITTED): a restock committed between the two was counted and
// still owed, and the relay gave it to the counter again (drift -1). The
// side transaction's row lock holds the settle statement so that the
// cancel commits in between.
func TestGateRestockDuringRebuildCountsOnce(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 5, 1)
	var ids []string
	for c := range 2 {
		res, err := f.store.Reserve(ctx, req(sale.ID, fmt.Sprintf("cust_%d", c), "k", 1))
		require.NoError(t, err)
		ids = append(ids, res.Reservation.ID)
	}
	f.settle(t, sale.ID)
	// Cancelled on another instance: owed to the gate, not relayed.
	_, err := f.pg.Cancel(ctx, ids[0], flashline.Actor{CustomerID: "cust_0"})
	require.NoError(t, err)
	f.pause(t, sale.ID)

	side, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = side.Rollback(context.Background()) })
	_, err = side.Exec(ctx, "SELECT 1 FROM gate_outbox WHERE movement_id = $1 FOR UPDATE", "restock:"+ids[0])
	require.NoError(t, err)

	rebuilt := make(chan struct{})
	var rebuildErr error
	go func() {
		defer close(rebuilt)
		_, rebuildErr = f.g.Rebuild(ctx, sale.ID)
	}()
	require.True(t, blockedOn(t, f.pool, "UPDATE gate_outbox SET applied_at", rebuilt), "the rebuild did not wait to settle the locked movement")
	// The second cancel commits while the rebuild settles.
	_, err = f.pg.Cancel(ctx, ids[1], flashline.Actor{CustomerID: "cust_1"})
	require.NoError(t, err)
	require.NoError(t, side.Rollback(ctx))
	<-rebuilt
	require.NoError(t, rebuildErr)
	st := f.drift(t, sale.ID)
	require.True(t, st.OK, "status %+v", st)
	require.EqualValues(t, 5, st.Counter)
	// Both customers' units came back to the buyer set: each may buy again.
	_, err = f.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	for c := range 2 {
		_, err := f.store.Reserve(ctx, req(sale.ID, fmt.Sprintf("cust_%d", c), "k2", 1))
		require.NoError(t, err)
	}
}
