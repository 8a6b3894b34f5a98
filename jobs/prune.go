package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/flashline/flashline"
)

// PruneArgs is the idempotency-key pruning job.
type PruneArgs struct{}

// Kind implements river.JobArgs.
func (PruneArgs) Kind() string { return "flashline_prune_keys" }

// PruneWorker deletes idempotency keys older than the retention, and
// rate-limit windows that ended over an hour ago, in small batches.
type PruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	store     flashline.JobStore
	retention time.Duration
	logger    *slog.Logger
	metrics   *metrics
}

// pruneBatchSize keeps each delete short.
const pruneBatchSize = 1000

// Work implements river.Worker.
func (w *PruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	n, err := w.store.PruneIdempotencyKeys(ctx, int(w.retention.Seconds()), pruneBatchSize)
	w.metrics.prunedKeys.Add(float64(n))
	if n > 0 {
		w.logger.InfoContext(ctx, "jobs: pruned idempotency keys", "deleted", n)
	}
	// Rate-limit windows that ended over an hour ago count nothing any more.
	windows, rlErr := w.store.PruneRateLimits(ctx, pruneBatchSize)
	if windows > 0 {
		w.logger.InfoContext(ctx, "jobs: pruned rate-limit windows", "deleted", windows)
	}
	return errors.Join(err, rlErr)
}
