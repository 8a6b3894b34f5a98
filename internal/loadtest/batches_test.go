package loadtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
)

// metricsPage is /metrics as the service's registry writes it: the batch
// histogram of two observations (1 and 2) among other metrics.
func metricsPage(t *testing.T) []byte {
	t.Helper()
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "flashline_reserve_batch_size", Help: "Reservations per transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "flashline_reserve_batch_size_other_total", Help: "Not it."})
	reg.MustRegister(h, other)
	h.Observe(1)
	h.Observe(2)
	other.Add(7)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page
}

func TestBatchStatsFromMetrics(t *testing.T) {
	t.Parallel()
	page := metricsPage(t)
	st := BatchStats{Buckets: map[string]float64{}}
	require.NoError(t, st.add(page))
	require.NoError(t, st.add(page), "a second target adds up")
	require.Equal(t, 4.0, st.Count)
	require.Equal(t, 6.0, st.Sum)
	require.Equal(t, map[string]float64{"1": 2, "2": 4, "4": 4, "8": 4, "16": 4, "32": 4, "64": 4, "128": 4, "+Inf": 4}, st.Buckets)
	require.Equal(t, "mean 1.5 over 4 batches; <=1: 2 <=2: 2 <=4: 0 <=8: 0 <=16: 0 <=32: 0 <=64: 0 <=128: 0", st.String())

	t.Run("Minus", func(t *testing.T) {
		before := BatchStats{Buckets: map[string]float64{}}
		require.NoError(t, before.add(page))
		d := st.minus(before)
		require.Equal(t, 2.0, d.Count)
		require.Equal(t, 1.0, d.Buckets["1"])
	})
	t.Run("NoHistogram", func(t *testing.T) {
		none := BatchStats{Buckets: map[string]float64{}}
		require.NoError(t, none.add([]byte("# TYPE up gauge\nup 1\n")))
		require.Zero(t, none.Count)
		require.Contains(t, none.String(), "none seen")
	})
	t.Run("NotMetrics", func(t *testing.T) {
		bad := BatchStats{Buckets: map[string]float64{}}
		require.Error(t, bad.add([]byte(`{"error":{"code":"unauthenticated","message":"no"}}`)))
		require.Zero(t, bad.Count)
	})
}
