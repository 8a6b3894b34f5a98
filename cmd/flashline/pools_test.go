package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestPoolsKeepConfirmFree: a waiting-room ticket flood and a purchase flood
// at once, on one instance with two connections in each pool, saturate the
// purchase path's pool, and confirm, on the admin pool, never waits for a
// connection. (The jobs, which share the admin pool, are off: this is about
// the crowd.) Tickets write little now (a position lease per block, no
// rate-limit row), so the room's pool may or may not fill: whatever it does
// stays on its own pool.
func TestPoolsKeepConfirmFree(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a flashline serve process: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--no-workers",
		"--sale-pool-size", "2", "--room-pool-size", "2", "--admin-pool-size", "2")
	c := testserver.NewClient()
	ctx := context.Background()
	direct := c.CreateSale(t, srv.URL, `{"sku":"sku_direct","initialStock":100000,"perCustomerLimit":1,"confirmation":"customer"}`)
	// A sale runs one batch at a time: three sales keep more batches running
	// than the purchase pool has connections.
	buying := []string{direct,
		c.CreateSale(t, srv.URL, `{"sku":"sku_more","initialStock":100000,"perCustomerLimit":1}`),
		c.CreateSale(t, srv.URL, `{"sku":"sku_most","initialStock":100000,"perCustomerLimit":1}`)}
	room := c.CreateSale(t, srv.URL, `{"sku":"sku_room","initialStock":100000,"admission":"waiting_room"}`)
	_, err := c.Do(ctx, http.MethodPost, srv.URL+"/admin/sales/"+room+"/open", testserver.AdminToken, "")
	require.NoError(t, err)

	// Holds to confirm, made before the floods.
	const holds = 40
	type hold struct{ id, token string }
	toConfirm := make([]hold, holds)
	for i := range toConfirm {
		tok := testserver.Token(t, fmt.Sprintf("payer-%d", i))
		r, err := c.Reserve(ctx, srv.URL, direct, tok, "k", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		toConfirm[i] = hold{id: reservationID(t, r.Body), token: tok}
	}
	confirm := func(h hold) time.Duration {
		start := time.Now()
		r, err := c.Do(ctx, http.MethodPost, srv.URL+"/reservations/"+h.id+"/confirm", h.token, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return time.Since(start)
	}
	var quiet []time.Duration
	for _, h := range toConfirm[:holds/2] {
		quiet = append(quiet, confirm(h))
	}

	empty := func(pool string) float64 {
		return metric(t, c, srv.URL, `flashline_pool_empty_acquire_total{pool="`+pool+`"}`)
	}
	before := map[string]float64{"sale": empty("sale"), "room": empty("room"), "admin": empty("admin")}
	floodCtx, stop := context.WithCancel(ctx)
	var flood sync.WaitGroup
	var tickets, reserves atomic.Int64
	for g := range 64 {
		flood.Go(func() {
			for i := 0; floodCtx.Err() == nil; i++ {
				tok := testserver.Token(t, fmt.Sprintf("crowd-%d-%d", g, i))
				if g%2 == 0 {
					if r, err := c.Do(floodCtx, http.MethodGet, srv.URL+"/sales/"+room+"/ticket", tok, ""); err == nil && r.Status == http.StatusOK {
						tickets.Add(1)
					}
				} else if r, err := c.Reserve(floodCtx, srv.URL, buying[i%len(buying)], tok, "k", 1); err == nil && r.Status == http.StatusCreated {
					reserves.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // the floods under way
	var loaded []time.Duration
	for _, h := range toConfirm[holds/2:] {
		loaded = append(loaded, confirm(h))
	}
	stop()
	flood.Wait()
	after := map[string]float64{"sale": empty("sale"), "room": empty("room"), "admin": empty("admin")}

	t.Logf("during the floods (%d tickets, %d reservations): confirm p50 %s, max %s; before: p50 %s, max %s; acquires that waited: sale +%.0f, room +%.0f, admin +%.0f",
		tickets.Load(), reserves.Load(), pct(loaded, 50), slices.Max(loaded), pct(quiet, 50), slices.Max(quiet),
		after["sale"]-before["sale"], after["room"]-before["room"], after["admin"]-before["admin"])
	require.Positive(t, tickets.Load())
	require.Positive(t, reserves.Load())
	require.Greater(t, after["sale"], before["sale"], "the purchase flood saturated the purchase pool")
	require.Equal(t, before["admin"], after["admin"], "confirm waited for an admin connection")
}
