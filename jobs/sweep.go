package jobs

import (
	"context"
	"log/slog"

	"github.com/riverqueue/river"

	"github.com/flashline/flashline"
)

// SweepArgs is the expiry sweeper's job.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "flashline_sweep" }

// SweepWorker expires pending reservations whose time is up and returns their
// units to stock, batch by batch. The restock's idempotency lives in the
// database (flashline.JobStore.ExpireDue), not here: two sweepers, a retried job or
// a process killed half way return nothing twice.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	store     flashline.JobStore
	batchSize int
	logger    *slog.Logger
	metrics   *metrics
	gate      Gate // nil: no gate
}

// maxBatchesPerRun bounds one run, so a backlog is worked off over several
// ticks rather than by one job that never ends.
const maxBatchesPerRun = 20

// Work implements river.Worker.
func (w *SweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	for range maxBatchesPerRun {
		expired, err := w.store.ExpireDue(ctx, w.batchSize)
		if err != nil {
			return err
		}
		units := 0
		for _, e := range expired {
			units += e.Quantity
		}
		if len(expired) > 0 {
			if w.gate != nil {
				w.gate.Kick() // gated sales' units go back to their counters now
			}
			w.metrics.restocked.Add(float64(units))
			w.logger.InfoContext(ctx, "jobs: sweep", "expired", len(expired), "units", units)
		}
		if len(expired) < w.batchSize {
			break
		}
	}
	overdue, err := w.store.SweepOverdue(ctx)
	if err != nil {
		return err
	}
	w.metrics.overdue.Set(overdue.Seconds())
	w.metrics.lastSweep.SetToCurrentTime()
	return nil
}
