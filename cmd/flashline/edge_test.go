package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/internal/testserver"
	"github.com/flashline/flashline/waitroom"
)

// TestPreopenTicketsWriteNoRowPerArrival: 10,000 customers take a ticket
// before the open of a randomized_at_open room, half on each of two
// instances. No row is written per arrival (rate_limits untouched, no
// position leased); the room's row is updated only by the instances' ticket
// counts (one UPDATE per instance every 100 ms at most); the count is exact;
// and every place is consistent on both instances.
func TestPreopenTicketsWriteNoRowPerArrival(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	dbURL := testdb.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	servers := testserver.StartN(t, 2, dbURL)
	c := testserver.NewClient()
	keys, err := waitroom.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)

	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sale := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_edge","initialStock":100,"admission":"waiting_room",
		"fairness":"randomized_at_open","opensAt":%q}`, opensAt.Format(time.RFC3339)))

	type tableWrites struct{ ins, upd int64 }
	writes := func(table string) tableWrites {
		var w tableWrites
		_, err := pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&w.ins, &w.upd))
		return w
	}
	// A backend reports its statistics a second after a transaction at the
	// soonest, and up to ten seconds later once it is idle: wait until the
	// sale's own row is counted before taking the baseline.
	require.Eventually(t, func() bool { return writes("waiting_rooms").ins >= 1 }, 15*time.Second, 100*time.Millisecond,
		"the room's row reaches pg_stat_user_tables")
	limitsBefore, roomsBefore := writes("rate_limits"), writes("waiting_rooms")
	var next0 int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT next_position FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&next0))

	const customers = 10000
	tokens := make([]string, customers)
	jwts := make([]string, customers)
	for i := range jwts {
		jwts[i] = testserver.Token(t, fmt.Sprintf("edge-%05d", i))
	}
	start := time.Now()
	var failed atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range work {
				r, err := c.Do(ctx, http.MethodGet, servers[i%2].URL+"/sales/"+sale+"/ticket", jwts[i], "")
				if err != nil || r.Status != http.StatusOK {
					if failed.Add(1) < 5 {
						t.Errorf("ticket %d: %v %d %s", i, err, r.Status, r.Body)
					}
					continue
				}
				var v struct{ Token string }
				if err := json.Unmarshal(r.Body, &v); err != nil {
					t.Error(err)
				}
				tokens[i] = v.Token
			}
		})
	}
	for i := range customers {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(t, failed.Load())

	// The count reaches the database within a flush (100 ms).
	var counted, next int64
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_tickets, next_position FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&counted, &next))
		return counted == customers
	}, 5*time.Second, 50*time.Millisecond, "the pre-open crowd counted %d of %d", counted, customers)
	require.Equal(t, next0, next, "no position was leased")

	time.Sleep(1500 * time.Millisecond)
	limitsAfter, roomsAfter := writes("rate_limits"), writes("waiting_rooms")
	require.Equal(t, limitsBefore, limitsAfter, "a rate-limit row was written")
	require.Zero(t, roomsAfter.ins-roomsBefore.ins)
	flushes := roomsAfter.upd - roomsBefore.upd
	bound := 2 * (int64(elapsed/(100*time.Millisecond)) + 2)
	require.LessOrEqual(t, flushes, bound, "more than one count per instance per 100 ms")
	t.Logf("%d tickets on two instances in %s (%.0f/s): %d UPDATEs of the room's row (the instances' counts), 0 rows inserted",
		customers, elapsed.Round(time.Millisecond), customers/elapsed.Seconds(), flushes)

	// Places are the same on both instances once both have read the count,
	// and honest: the place is the draw's share of the crowd, the range
	// around it.
	time.Sleep(1500 * time.Millisecond)
	for i := 0; i < customers; i += 997 {
		tk, err := keys.ParseTicket(tokens[i])
		require.NoError(t, err)
		want := waitroom.Rank(tk, "randomized_at_open", customers)
		for _, srv := range servers {
			r, err := c.Do(ctx, http.MethodGet, srv.URL+"/sales/"+sale+"/status?token="+tokens[i], jwts[i], "")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			var st struct {
				Position      int64
				PositionRange struct{ P25, P75 int64 }
			}
			require.NoError(t, json.Unmarshal(r.Body, &st))
			require.Equal(t, want, st.Position, "customer %d on %s", i, srv.URL)
			require.LessOrEqual(t, st.PositionRange.P25, st.Position)
			require.GreaterOrEqual(t, st.PositionRange.P75, st.Position)
		}
	}
}
