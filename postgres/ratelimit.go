package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// RateLimit counts one hit for subject in scope (e.g. "ticket", customer and
// sale) and returns flashline.ErrRateLimited when the current fixed window of
// length window already holds max hits. The counters are rows in rate_limits,
// so the limit holds across every instance; one upsert per call
// (RateLimitHit). window is whole seconds, at least one and at most an hour
// (the pruning job deletes windows that ended over an hour ago).
// It runs on the waiting room's pool (new tickets are what it limits there).
func (s *Store) RateLimit(ctx context.Context, scope, subject string, window time.Duration, max int) error {
	return rateLimit(ctx, s.room, scope, subject, window, max)
}

func rateLimit(ctx context.Context, pool *db, scope, subject string, window time.Duration, max int) error {
	secs := int32(window / time.Second)
	if secs < 1 || window > time.Hour || max < 1 {
		return fmt.Errorf("rate limit %s: window must be 1s-1h and max at least 1, got %v and %d", scope, window, max)
	}
	allowed, err := dbsqlc.New(pool).RateLimitHit(ctx, dbsqlc.RateLimitHitParams{
		Scope: scope, Subject: subject, WindowSeconds: secs, MaxHits: int32(max),
	})
	if err != nil {
		return fmt.Errorf("rate limit %s: %w", scope, translate(err))
	}
	if !allowed {
		return fmt.Errorf("rate limit %s: %w", scope, flashline.ErrRateLimited)
	}
	return nil
}

// PruneRateLimits deletes rate-limit windows that ended over an hour ago,
// batchSize at a time, and returns how many it deleted.
func (s *Store) PruneRateLimits(ctx context.Context, batchSize int) (int64, error) {
	var total int64
	q := dbsqlc.New(s.jobs)
	for {
		n, err := q.RateLimitsPrune(ctx, dbsqlc.RateLimitsPruneParams{BatchSize: int32(batchSize)})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune rate limits: %w", translate(err))
		}
		if n < int64(batchSize) {
			return total, nil
		}
	}
}
