package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// TestFullServerIsOverload: a server with no session slot left for the
// instance (SQLSTATE 53300; here a role's CONNECTION LIMIT, which PostgreSQL
// refuses as it refuses a session past max_connections) is a busy server,
// not an outage: the purchase path is answered overloaded at once, never
// "paused", and a cancel waits for a slot (up to RoleWait) instead of
// failing.
func TestFullServerIsOverload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, dbURL := testdb.NewPool(t)
	s := postgres.NewStore(postgres.SinglePool(owner), postgres.Options{})
	sale := createSale(t, s, 10, 1)
	held, err := s.Reserve(ctx, reserveReq(sale.ID, "alice", "k1", 1))
	require.NoError(t, err)

	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "flashline_full_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{
		"CREATE ROLE " + ident + " LOGIN CONNECTION LIMIT 1",
		"GRANT ALL ON ALL TABLES IN SCHEMA public TO " + ident,
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + ident,
	} {
		_, err := owner.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() {
		_, _ = owner.Exec(context.Background(), "DROP OWNED BY "+ident)
		_, _ = owner.Exec(context.Background(), "DROP ROLE "+ident)
	})
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.User(role)
	holder, err := pgx.Connect(ctx, u.String()) // the role's only slot
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close(context.Background()) })
	limited, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(limited.Close)
	full := postgres.NewStore(postgres.SinglePool(limited), postgres.Options{})

	t.Run("PurchasePathIsOverloadedAtOnce", func(t *testing.T) {
		_, err := full.Reserve(ctx, reserveReq(sale.ID, "bob", "k1", 1))
		require.ErrorIs(t, err, flashline.ErrOverloaded)
		require.NotErrorIs(t, err, flashline.ErrUnavailable)
	})
	t.Run("CancelWaitsForASlot", func(t *testing.T) {
		freed := make(chan struct{})
		go func() {
			time.Sleep(300 * time.Millisecond)
			holder.Close(context.Background())
			close(freed)
		}()
		r, err := full.Cancel(ctx, held.Reservation.ID, flashline.Actor{CustomerID: "alice"})
		require.NoError(t, err)
		require.Equal(t, flashline.ReservationCancelled, r.State)
		select {
		case <-freed:
		default:
			t.Fatal("the cancel was answered before a slot was free")
		}
	})
}
