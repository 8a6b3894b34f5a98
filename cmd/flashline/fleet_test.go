package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestConsoleSeesTheFleet: with two instances, one selling and the other
// answering nothing, the idle one's live snapshot shows the fleet's
// reservation rate, with the selling instance in its breakdown.
func TestConsoleSeesTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	servers := testserver.StartN(t, 2, dbURL)
	selling, watching := servers[0], servers[1]
	c := testserver.NewClient()
	saleID := c.CreateSale(t, selling.URL, `{"sku":"fleet-1","initialStock":100000,"confirmation":"customer"}`)

	// Sell on the first instance until the second one's page has seen it.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			cust := fmt.Sprintf("fleet-%d", i)
			r, err := c.Reserve(ctx, selling.URL, saleID, testserver.Token(t, cust), "k-"+cust, 1)
			if ctx.Err() != nil {
				return
			}
			if err != nil || r.Status != http.StatusCreated {
				t.Errorf("reserve: %v %d %s", err, r.Status, r.Body)
				return
			}
		}
	})
	defer func() { stop(); wg.Wait() }()

	var live api.Live
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := c.To(watching.URL).Live(t.Context(), testserver.AdminToken, saleID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		live = r.Value
		var other *api.InstanceRates
		for i := range live.Instances {
			if !live.Instances[i].This && live.Instances[i].Reserved > 0 {
				other = &live.Instances[i]
			}
		}
		if other != nil && live.Rates.Reserved >= other.Reserved {
			break
		}
		require.True(t, time.Now().Before(deadline), "the idle instance's page never showed the other's sales: %+v", live)
		time.Sleep(200 * time.Millisecond) // the next snapshot
	}
	// The page's own instance is in the breakdown, answering nothing.
	var this int
	for _, i := range live.Instances {
		if i.This {
			this++
			require.Zero(t, i.Reserved)
		}
	}
	require.LessOrEqual(t, this, 1)
}
