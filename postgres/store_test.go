package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/postgres"
)

func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := testdb.NewPool(t)
	return postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}), pool
}

func createSale(t *testing.T, s *postgres.Store, stock, limit int) flashline.Sale {
	t.Helper()
	sale, err := s.CreateSale(context.Background(), flashline.NewSale{SKU: "sku_991", InitialStock: stock, PerCustomerLimit: limit, ReservationTTLSeconds: 600})
	require.NoError(t, err)
	return sale
}

func reserveReq(saleID, customer, key string, qty int) flashline.ReserveRequest {
	return flashline.ReserveRequest{
		SaleID: saleID, CustomerID: customer, IdempotencyKey: key, Quantity: qty,
		Fingerprint: []byte(fmt.Sprintf("%s/%d", saleID, qty)),
	}
}

func requireInvariant(t *testing.T, s *postgres.Store, saleID string) flashline.Sale {
	t.Helper()
	sale, err := s.Sale(context.Background(), saleID)
	require.NoError(t, err)
	require.True(t, sale.Invariant.OK, "invariant: %+v", sale)
	require.Equal(t, sale.InitialStock, sale.Available+sale.Pending+sale.Confirmed)
	require.Equal(t, sale.Available, sale.LedgerTotal)
	return sale
}

func TestReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	sale := createSale(t, s, 2, 2)

	first, err := s.Reserve(ctx, reserveReq(sale.ID, "alice", "k1", 1))
	require.NoError(t, err)
	require.NotEmpty(t, first.Receipt)
	require.False(t, first.Replayed)

	t.Run("ReplaySameBody", func(t *testing.T) {
		again, err := s.Reserve(ctx, reserveReq(sale.ID, "alice", "k1", 1))
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, first.Receipt, again.Receipt)
	})
	t.Run("KeyReusedDifferentBody", func(t *testing.T) {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, "alice", "k1", 2))
		require.ErrorIs(t, err, flashline.ErrIdempotencyKeyReused)
	})
	t.Run("LimitReached", func(t *testing.T) {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, "alice", "k2", 1))
		require.ErrorIs(t, err, flashline.ErrLimitReached)
	})
	t.Run("KeysArePerCustomer", func(t *testing.T) {
		res, err := s.Reserve(ctx, reserveReq(sale.ID, "bob", "k1", 1))
		require.NoError(t, err)
		require.False(t, res.Replayed)
	})
	t.Run("SoldOut", func(t *testing.T) {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, "carol", "k1", 1))
		require.ErrorIs(t, err, flashline.ErrSoldOut)
		got := requireInvariant(t, s, sale.ID)
		require.Equal(t, flashline.StateSoldOut, got.State)
	})
	t.Run("SoldOutIsNotStored", func(t *testing.T) {
		// carol's refused key is evaluated afresh once stock comes back.
		var bobRes struct{ ReservationID string }
		r, err := s.Reserve(ctx, reserveReq(sale.ID, "bob", "k1", 1))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(r.Receipt, &bobRes))
		_, err = s.Cancel(ctx, bobRes.ReservationID, flashline.Actor{CustomerID: "bob"})
		require.NoError(t, err)
		res, err := s.Reserve(ctx, reserveReq(sale.ID, "carol", "k1", 1))
		require.NoError(t, err)
		require.NotEmpty(t, res.Receipt)
	})
	t.Run("QuantityAboveLimit", func(t *testing.T) {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, "dave", "k1", 3))
		require.ErrorIs(t, err, flashline.ErrQuantityAboveLimit)
	})
	t.Run("UnknownSale", func(t *testing.T) {
		_, err := s.Reserve(ctx, reserveReq("sale_nope", "dave", "k1", 1))
		require.ErrorIs(t, err, flashline.ErrNotFound)
	})
	t.Run("Paused", func(t *testing.T) {
		_, err := s.SetSaleState(ctx, sale.ID, flashline.ActionPause)
		require.NoError(t, err)
		_, err = s.Reserve(ctx, reserveReq(sale.ID, "erin", "k1", 1))
		require.ErrorIs(t, err, flashline.ErrSaleNotOpen)
		_, err = s.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
		require.ErrorIs(t, err, flashline.ErrInvalidTransition)
		_, err = s.SetSaleState(ctx, sale.ID, flashline.ActionResume)
		require.NoError(t, err)
	})
	requireInvariant(t, s, sale.ID)
}

// TestNorthlineRace is the check-then-act oversell, done right: 500 buyers
// at once for 200 units sell exactly 200.
func TestNorthlineRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 500 transactions queue for 40 connections and one row; on a loaded
	// machine that takes longer than the production timeout, which is not
	// what this test is about.
	pool, _ := testdb.NewPool(t)
	s := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{ReserveTimeout: 2 * time.Minute})
	sale := createSale(t, s, 200, 1)
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() {
			_, err := s.Reserve(ctx, reserveReq(sale.ID, fmt.Sprintf("c%03d", i), "k", 1))
			key := "reserved"
			if err != nil {
				key = err.Error()
				if errors.Is(err, flashline.ErrSoldOut) {
					key = "sold_out"
				}
			}
			mu.Lock()
			outcomes[key]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[string]int{"reserved": 200, "sold_out": 300}, outcomes)
	got := requireInvariant(t, s, sale.ID)
	require.Equal(t, 0, got.Available)
	require.Equal(t, 200, got.Pending)
}

func TestPruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale := createSale(t, s, 10, 1)
	for i := range 5 {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, fmt.Sprintf("c%d", i), "k", 1))
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE customer_id <> 'c0'`)
	require.NoError(t, err)

	deleted, err := s.PruneIdempotencyKeys(ctx, 24*3600, 2) // batches of 2: 2, 2, 0
	require.NoError(t, err)
	require.EqualValues(t, 4, deleted)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&left))
	require.Equal(t, 1, left, "the key younger than the retention stays")
	requireInvariant(t, s, sale.ID)
}
