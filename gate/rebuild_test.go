package gate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/salecache"
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

// holdFirst is a go-redis hook that holds the first command or pipeline
// that writes a gate's unit numbers (the seq key, which a rebuild writes)
// until release is closed, having closed held.
type holdFirst struct {
	seqKey        string
	once          sync.Once
	held, release chan struct{}
}

func (h *holdFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdFirst) mentions(cmd redis.Cmder) bool {
	return slices.ContainsFunc(cmd.Args(), func(a any) bool { return a == h.seqKey })
}

func (h *holdFirst) wait() {
	h.once.Do(func() {
		close(h.held)
		<-h.release
	})
}

func (h *holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.mentions(cmd) {
			h.wait()
		}
		return next(ctx, cmd)
	}
}

func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, h.mentions) {
			h.wait()
		}
		return next(ctx, cmds)
	}
}

// TestGateOverlappingRebuildsKeepTheLaterEpoch: two rebuilds of a sale at
// once (two admins, a retry after a timeout) whose Redis writes land in the
// other order. The earlier epoch's counter wrote over the later one's: its
// unit numbers were of an epoch the database had left, so every unit it
// handed out after the resume was refused as returned (and none came back),
// and nothing noticed, since the check compared no epochs. Now the earlier
// write is refused with a clear error, the later counter stands, and the
// sale sells. A second rebuild is refused while the first holds the
// rebuild lock (TestGateRebuildRefusedWhileAnotherRuns): here the first's
// lock goes with its session (its connection killed, a database failover)
// while its write is in flight, the one way two can still overlap.
func TestGateOverlappingRebuildsKeepTheLaterEpoch(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 5, 1)
	_, err := f.store.Reserve(ctx, req(sale.ID, "cust_0", "k", 1))
	require.NoError(t, err)
	f.pause(t, sale.ID)

	// The first rebuild's Redis write is held in flight.
	hook := &holdFirst{seqKey: gate.SeqKey(sale.ID), held: make(chan struct{}), release: make(chan struct{})}
	releaseOnCleanup(t, hook.release)
	// A second client of the fixture's Redis, with the hook.
	opts := *f.rdb.Options()
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(hook)
	slow := gate.New(rdb, f.pg, salecache.New(f.pg, salecache.Options{}), gate.Options{Timeout: 5 * time.Second})
	first := make(chan error, 1)
	go func() {
		_, err := slow.Rebuild(ctx, sale.ID)
		first <- err
	}()
	select {
	case <-hook.held:
	case err := <-first:
		t.Fatalf("the first rebuild ended before its Redis write: %v", err)
	}

	// The first's rebuild lock goes with its session.
	f.killRebuildLock(t)
	// The second runs to the end, then the first's write lands.
	counter, err := f.g.Rebuild(ctx, sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, counter)
	close(hook.release)
	firstErr := <-first

	st := f.g.Status(ctx, sale.ID)
	require.True(t, st.OK, "status %+v", st)
	_, err = f.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	for c := 1; c < 5; c++ {
		_, err := f.store.Reserve(ctx, req(sale.ID, fmt.Sprintf("cust_%d", c), "k", 1))
		require.NoError(t, err)
	}
	_, err = f.store.Reserve(ctx, req(sale.ID, "cust_late", "k", 1))
	require.ErrorIs(t, err, flashline.ErrSoldOut)
	require.Zero(t, f.settle(t, sale.ID).Counter)
	require.ErrorIs(t, firstErr, flashline.ErrInvalidTransition, "the stale rebuild says it did not write")
	require.ErrorContains(t, firstErr, "another rebuild")
}

// killRebuildLock ends the session that holds a rebuild lock of this test's
// database (the only advisory lock held across statements), as a killed
// connection or a database failover would, and waits until the lock is
// gone with it (pg_terminate_backend only signals the backend).
func (f *fixture) killRebuildLock(t *testing.T) {
	t.Helper()
	const held = `FROM pg_locks l
		 WHERE l.locktype = 'advisory' AND l.granted AND l.pid <> pg_backend_pid()
		   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	var n int
	require.NoError(t, f.pool.QueryRow(context.Background(), "SELECT count(pg_terminate_backend(l.pid, 30000)) "+held).Scan(&n))
	require.Equal(t, 1, n, "sessions holding a rebuild lock")
	require.NoError(t, f.pool.QueryRow(context.Background(), "SELECT count(*) "+held).Scan(&n))
	require.Zero(t, n, "rebuild locks still held once their session ended")
}

// TestGateRebuildRefusedWhileAnotherRuns: a rebuild asked for while another
// of the same sale runs (a double click, a retry after a timeout, a second
// operator, on any instance) is refused at once, says so, and touches
// nothing; the first ends as if alone, and the next rebuild runs.
func TestGateRebuildRefusedWhileAnotherRuns(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 5, 1)
	other := f.sale(t, 3, 1)
	_, err := f.store.Reserve(ctx, req(sale.ID, "cust_0", "k", 1))
	require.NoError(t, err)
	f.pause(t, sale.ID)
	f.pause(t, other.ID)

	// The first rebuild's Redis write is held in flight.
	hook := &holdFirst{seqKey: gate.SeqKey(sale.ID), held: make(chan struct{}), release: make(chan struct{})}
	releaseOnCleanup(t, hook.release)
	opts := *f.rdb.Options()
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(hook)
	slow := gate.New(rdb, f.pg, salecache.New(f.pg, salecache.Options{}), gate.Options{Timeout: 5 * time.Second})
	first := make(chan error, 1)
	go func() {
		_, err := slow.Rebuild(ctx, sale.ID)
		first <- err
	}()
	select {
	case <-hook.held:
	case err := <-first:
		t.Fatalf("the first rebuild ended before its Redis write: %v", err)
	}

	_, err = f.g.Rebuild(ctx, sale.ID)
	require.ErrorIs(t, err, flashline.ErrRebuildRunning)
	require.ErrorContains(t, err, "another rebuild of the sale's gate is running")
	// Another sale's rebuild is not held up.
	counter, err := f.g.Rebuild(ctx, other.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, counter)

	close(hook.release)
	require.NoError(t, <-first)
	st := f.g.Status(ctx, sale.ID)
	require.True(t, st.OK, "status %+v", st)
	require.EqualValues(t, 4, st.Counter)
	// The lock went with the first: the next rebuild runs.
	counter, err = f.g.Rebuild(ctx, sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, counter)
}
