package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestStartsThroughABusyDatabase: serve's first read of its sales, before it
// serves, cannot finish within its bound (a side transaction holds the
// sales table, as a loaded database's slowness did in fresh-clone run 34,
// where serve exited 1). Serve says so, asks again, and starts once the
// database answers, instead of exiting.
func TestStartsThroughABusyDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve: not in -short")
	}
	dbURL := testdb.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE sales IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	s := testserver.Spawn(t, dbURL)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(s.Logs(), "the sale cache's first read failed; asking again") {
		require.False(t, s.Exited(), "serve exited while the sales were held:\n%s", s.Logs())
		require.True(t, time.Now().Before(deadline), "serve never said it asks again:\n%s", s.Logs())
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, tx.Rollback(ctx))

	select {
	case <-s.Listening():
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve did not start once the sales were free (exited: %v):\n%s", s.Exited(), s.Logs())
	}
	require.False(t, s.Exited(), "%s", s.Logs())
}
