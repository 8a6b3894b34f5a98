package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/internal/testserver"
)

// TestShutdownDrainsInFlight: SIGTERM while reservations are in flight (held
// up on the stock row by a transaction of the test's own) lets every one of
// them finish and answer, then the process exits 0.
func TestShutdownDrainsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	sale := c.CreateSale(t, srv.URL, `{"sku":"sku_drain","initialStock":100,"perCustomerLimit":1}`)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT quantity FROM stock WHERE sale_id = $1 FOR UPDATE`, sale)
	require.NoError(t, err)

	const n = 10
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := c.Reserve(ctx, srv.URL, sale, testserver.Token(t, fmt.Sprintf("d%d", i)), "k", 1)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			statuses[i] = r.Status
		})
	}
	time.Sleep(time.Second) // all ten are waiting on the row lock

	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(t) }()
	time.Sleep(500 * time.Millisecond) // the server is draining
	require.NoError(t, tx.Rollback(ctx))
	wg.Wait()
	require.NoError(t, <-stopped, "flashline serve exits 0 after draining")
	for i, st := range statuses {
		require.Equal(t, 201, st, "request %d", i)
	}
}
