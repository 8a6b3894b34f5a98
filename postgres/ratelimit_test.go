package postgres_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// TestRateLimitAcrossInstances: two Stores on their own pools (two
// instances) share one budget per subject and window, under concurrency.
func TestRateLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	_, url := testdb.NewPool(t)
	ctx := context.Background()
	stores := make([]*postgres.Store, 2)
	for i := range stores {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		stores[i] = postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	}
	// A window long enough that the test never straddles two.
	const window, limit = time.Hour, 25
	var allowed, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			err := stores[i%2].RateLimit(ctx, "ticket", "sale_1\nalice", window, limit)
			switch {
			case err == nil:
				allowed.Add(1)
			case errors.Is(err, flashline.ErrRateLimited):
				limited.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(limit), allowed.Load())
	require.Equal(t, int64(60-limit), limited.Load())

	t.Run("OtherSubjectsAndScopesHaveTheirOwn", func(t *testing.T) {
		require.NoError(t, stores[0].RateLimit(ctx, "ticket", "sale_1\nbob", window, limit))
		require.NoError(t, stores[1].RateLimit(ctx, "reserve", "sale_1\nalice", window, limit))
	})
	t.Run("NextWindowStartsAfresh", func(t *testing.T) {
		require.NoError(t, stores[0].RateLimit(ctx, "short", "carol", time.Second, 1))
		err := stores[1].RateLimit(ctx, "short", "carol", time.Second, 1)
		if err != nil { // the first hit may have been at the very end of a window
			require.ErrorIs(t, err, flashline.ErrRateLimited)
			time.Sleep(1100 * time.Millisecond)
			require.NoError(t, stores[1].RateLimit(ctx, "short", "carol", time.Second, 1))
		}
	})
	t.Run("BadArguments", func(t *testing.T) {
		require.Error(t, stores[0].RateLimit(ctx, "x", "y", 0, 1))
		require.Error(t, stores[0].RateLimit(ctx, "x", "y", 2*time.Hour, 1))
		require.Error(t, stores[0].RateLimit(ctx, "x", "y", time.Minute, 0))
	})
	t.Run("PruneDeletesOldWindowsOnly", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		_, err = pool.Exec(ctx, `INSERT INTO rate_limits (scope, subject, window_start, hits) VALUES ('old', 'x', now() - interval '2 hours', 3)`)
		require.NoError(t, err)
		n, err := stores[0].PruneRateLimits(ctx, 1000)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		var left int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rate_limits`).Scan(&left))
		require.Positive(t, left)
	})
}
