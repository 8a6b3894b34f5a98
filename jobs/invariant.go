package jobs

import (
	"context"
	"log/slog"

	"github.com/riverqueue/river"

	"github.com/flashline/flashline"
)

// InvariantArgs is the invariant check's job.
type InvariantArgs struct{}

// Kind implements river.JobArgs.
func (InvariantArgs) Kind() string { return "flashline_invariant" }

// InvariantWorker checks available + pending + confirmed == initial, and that
// the ledger agrees with stock, for every sale still selling or holding
// reservations. On a mismatch the sale is paused by the check itself (every
// instance reads the state on each reservation, so all refuse at once), an
// incident is recorded, and this logs at error level.
type InvariantWorker struct {
	river.WorkerDefaults[InvariantArgs]
	store   flashline.JobStore
	logger  *slog.Logger
	metrics *metrics
}

// Work implements river.Worker.
func (w *InvariantWorker) Work(ctx context.Context, _ *river.Job[InvariantArgs]) error {
	results, err := w.store.CheckInvariants(ctx, "")
	for _, r := range results {
		ok := 0.0
		if r.OK {
			ok = 1
		}
		if r.Opened {
			// The id of a sale not yet open is not announced in metrics:
			// a bot that reads it early gets a head start.
			w.metrics.invariantOK.WithLabelValues(r.SaleID).Set(ok)
			w.metrics.setVariants(r)
		}
		if r.NewIncident {
			w.metrics.incidents.Inc()
			w.logger.ErrorContext(ctx, "jobs: invariant mismatch, sale paused",
				"sale_id", r.SaleID, "detail", r.Detail)
		}
	}
	return err
}

// setVariants sets the gauges of each variant of an opened sale.
func (m *metrics) setVariants(r flashline.InvariantResult) {
	for _, v := range r.Variants {
		ok := 0.0
		if v.OK {
			ok = 1
		}
		m.variantOK.WithLabelValues(r.SaleID, v.SKU).Set(ok)
		m.variantUnits.WithLabelValues(r.SaleID, v.SKU, "available").Set(float64(v.Available))
		m.variantUnits.WithLabelValues(r.SaleID, v.SKU, "pending").Set(float64(v.Pending))
		m.variantUnits.WithLabelValues(r.SaleID, v.SKU, "confirmed").Set(float64(v.Confirmed))
	}
}
