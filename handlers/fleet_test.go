package handlers_test

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/postgres"
)

// TestConsoleFleetRates: the live snapshot adds up what the other
// instances reported to the shared table (their answers of their last
// second), with a line for each; a report older than flashline.FleetFresh
// counts for nothing.
func TestConsoleFleetRates(t *testing.T) {
	t.Parallel()
	s, _, cookie := consoleServer(t)
	sale := s.createSale(t, `{"sku":"fleet-table","initialStock":5,"confirmation":"customer"}`)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	// Two other instances: 12 reserved and 3 sold out over 1 s, and 4
	// reserved over 2 s (2/s), with their latencies.
	publish := func() {
		require.NoError(t, store.PublishAnswers(t.Context(), "pod-a", 1, []byte(`{"ok":12,"sold_out":3,"\u0000le 0.01":15,"\u0000le 0.05":15,"\u0000le +Inf":15}`)))
		require.NoError(t, store.PublishAnswers(t.Context(), "pod-b", 2, []byte(`{"ok":4,"\u0000le 0.01":3,"\u0000le 0.05":4,"\u0000le +Inf":4}`)))
		// Rows no instance writes (hand-edited): left out, not NaN in
		// every instance's rates.
		require.NoError(t, store.PublishAnswers(t.Context(), "pod-nan-seconds", math.NaN(), []byte(`{"ok":1}`)))
		require.NoError(t, store.PublishAnswers(t.Context(), "pod-nan-bound", 1, []byte(`{"ok":1,"\u0000le NaN":1}`)))
	}
	deadline := time.Now().Add(30 * time.Second)
	var live api.Live
	for {
		publish()
		r := s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/live", "", "", "Cookie", cookie)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.NoError(t, json.Unmarshal(r.Body, &live))
		if len(live.Instances) == 2 {
			break // both read fresh (a slow machine may take longer than FleetFresh between the write and the read)
		}
		require.True(t, time.Now().Before(deadline), "%s", r.Body)
		time.Sleep(handlers.LiveInterval)
	}
	require.InDelta(t, 14, live.Rates.Reserved, 1e-9)
	require.InDelta(t, 3, live.Rates.Refused["sold_out"], 1e-9)
	require.NotNil(t, live.Rates.P99Ms)
	require.InDelta(t, 50, *live.Rates.P99Ms, 1e-9, "the p99 of both instances' answers together")
	byName := map[string]api.InstanceRates{}
	for _, i := range live.Instances {
		byName[i.Instance] = i
	}
	require.InDelta(t, 12, byName["pod-a"].Reserved, 1e-9)
	require.InDelta(t, 2, byName["pod-b"].Reserved, 1e-9)
	require.False(t, byName["pod-a"].This)

	// A stale report counts for nothing.
	_, err := s.pool.Exec(t.Context(), `UPDATE console_instances SET updated_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/live", "", "", "Cookie", cookie)
		require.NoError(t, json.Unmarshal(r.Body, &live))
		if len(live.Instances) <= 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%s", r.Body)
		time.Sleep(handlers.LiveInterval)
	}
	require.Zero(t, live.Rates.Reserved)
}
