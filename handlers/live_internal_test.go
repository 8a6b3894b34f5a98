package handlers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveRates: two readings of the metrics a second apart give answers
// per second by outcome, the mean batch and the p99's bucket.
func TestLiveRates(t *testing.T) {
	t.Parallel()
	prev := map[string]float64{"ok": 10, "sold_out": 5, keyBatches: 2, keyBatchUnits: 10,
		keyLatencyPrefix + "0.005": 10, keyLatencyPrefix + "0.05": 15, keyLatencyPrefix + "+Inf": 15}
	now := map[string]float64{"ok": 30, "sold_out": 105, "overloaded": 4, keyBatches: 6, keyBatchUnits: 30,
		keyLatencyPrefix + "0.005": 100, keyLatencyPrefix + "0.05": 139, keyLatencyPrefix + "+Inf": 139}
	r := liveRates(prev, now, 2)
	require.Equal(t, 10.0, r.Reserved)
	require.Equal(t, map[string]float64{"sold_out": 50, "overloaded": 2}, r.Refused)
	require.Equal(t, 5.0, r.BatchSize)
	require.NotNil(t, r.P99Ms)
	require.Equal(t, 50.0, *r.P99Ms, "124 answers: 90 within 5 ms, the 99th percentile within 50 ms")

	r = liveRates(nil, now, 0)
	require.Zero(t, r.Reserved)
	require.Nil(t, r.P99Ms, "no previous reading: no rates")
	r = liveRates(now, now, 1)
	require.Nil(t, r.P99Ms, "no answers in the interval")
	require.Empty(t, r.Refused)
}
