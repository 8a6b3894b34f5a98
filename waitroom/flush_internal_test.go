package waitroom

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/postgres"
)

// TestRefusedCountsAreTriedAgain: a count of pre-open tickets, or a batch of
// holders, that the database does not take is kept for the next flush, up
// to countRetries times, then dropped (and logged); before this, each write
// checked its own cancelled context and dropped the first refusal.
func TestRefusedCountsAreTriedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A PostgreSQL that does not answer: nothing listens on port 1.
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r := &Room{store: postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}), opts: Options{Logger: slog.New(slog.DiscardHandler)}}
	l := &lease{pending: 3, holders: []string{"bob", "alice"}}
	for try := 1; try <= countRetries; try++ {
		r.flushCount(ctx, "sale_x", l)
		r.flushHolders(ctx, "sale_x", l)
		require.EqualValues(t, 3, l.pending, "try %d: the count kept for the next flush", try)
		require.Equal(t, []string{"bob", "alice"}, l.holders, "try %d: the holders kept for the next flush", try)
		require.Equal(t, try, l.failures)
		require.Equal(t, try, l.holderFailures)
	}
	r.flushCount(ctx, "sale_x", l)
	r.flushHolders(ctx, "sale_x", l)
	require.Zero(t, l.pending, "dropped after countRetries refusals")
	require.Empty(t, l.holders, "dropped after countRetries refusals")
}
