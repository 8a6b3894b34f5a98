package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// TestVariantMetrics: the invariant job labels each variant of an opened
// sale with variants, its invariant and its units by state, and a variant
// whose rows were written past the purchase path reads 0 while the others
// read 1; a sale without variants adds no variant series.
func TestVariantMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	reg := prometheus.NewRegistry()
	w := &InvariantWorker{store: store, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics(reg)}

	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "drop_49", PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		Variants: []flashline.NewVariant{{SKU: "S", Stock: 3}, {SKU: "M", Stock: 5, Buckets: 2}}})
	require.NoError(t, err)
	_, err = store.CreateSale(ctx, flashline.NewSale{SKU: "plain", InitialStock: 4, PerCustomerLimit: 1, ReservationTTLSeconds: 600})
	require.NoError(t, err)
	_, err = store.Reserve(ctx, flashline.ReserveRequest{SaleID: sale.ID, CustomerID: "c1", IdempotencyKey: "k",
		Quantity: 1, Variant: "M", Fingerprint: []byte("M")})
	require.NoError(t, err)

	require.NoError(t, w.Work(ctx, nil))
	// Counted before a read below could add a series.
	require.Equal(t, 2, series(t, reg, "flashline_variant_invariant_ok"), "one series a variant, none for the sale without")
	require.Equal(t, 6, series(t, reg, "flashline_variant_units"))
	units := func(sku, state string) float64 {
		return gauge(t, w.metrics.variantUnits.WithLabelValues(sale.ID, sku, state))
	}
	require.Equal(t, 3.0, units("S", "available"))
	require.Equal(t, 4.0, units("M", "available"))
	require.Equal(t, 1.0, units("M", "pending"))
	require.Equal(t, 0.0, units("M", "confirmed"))
	require.Equal(t, 1.0, gauge(t, w.metrics.variantOK.WithLabelValues(sale.ID, "S")))
	require.Equal(t, 1.0, gauge(t, w.metrics.variantOK.WithLabelValues(sale.ID, "M")))

	// A unit moved from M's row to S's: the sale adds up, the variants do not.
	_, err = pool.Exec(ctx, `UPDATE stock SET quantity = quantity + 1 WHERE sale_id = $1 AND variant = 'S'`, sale.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE stock SET quantity = quantity - 1 WHERE sale_id = $1 AND variant = 'M' AND bucket = 64`, sale.ID)
	require.NoError(t, err)
	require.NoError(t, w.Work(ctx, nil))
	require.Equal(t, 0.0, gauge(t, w.metrics.variantOK.WithLabelValues(sale.ID, "S")))
	require.Equal(t, 0.0, gauge(t, w.metrics.variantOK.WithLabelValues(sale.ID, "M")))
	require.Equal(t, 0.0, gauge(t, w.metrics.invariantOK.WithLabelValues(sale.ID)))
	paused, err := store.Sale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, flashline.StatePaused, paused.State)
	require.Contains(t, paused.PauseReason, "variant S: available 4", "the first variant that does not add up is named")
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, g.Write(&m))
	return m.GetGauge().GetValue()
}

// series counts the series of the family name in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}
