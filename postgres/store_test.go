package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	t.Run("ReplayAfterExtension", func(t *testing.T) {
		// The key keeps no body: its receipt is made again from the
		// reservation, whose expiry an extension moved, and is still the
		// first answer byte for byte, on the purchase path and the gate's.
		var held struct{ ReservationID string }
		require.NoError(t, json.Unmarshal(first.Receipt, &held))
		extended, err := s.ExtendReservation(ctx, held.ReservationID, 120, "ops")
		require.NoError(t, err)
		require.NotContains(t, string(first.Receipt), extended.ExpiresAt.UTC().Format(time.RFC3339))
		requireReplays(t, s, reserveReq(sale.ID, "alice", "k1", 1), first.Receipt)
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

// TestNorthlineRaceOfVariants is the race on a sale with variants: 300
// buyers at once for three variants of 10, 30 and 80 units, each trying a
// variant at random and, answered variant_sold_out, another among those it
// was not yet told were gone. Every variant sells exactly its units, the
// sale its 120, each buyer ends with one reservation (of the variant it was
// answered 201 for) or told every variant is sold out, and no customer holds
// two.
func TestNorthlineRaceOfVariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	s := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{ReserveTimeout: 2 * time.Minute})
	variants := []flashline.NewVariant{{SKU: "S", Stock: 10}, {SKU: "M", Stock: 30, Buckets: 2}, {SKU: "L", Stock: 80, Buckets: 4}}
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "sku_991", PerCustomerLimit: 1, ReservationTTLSeconds: 600, Variants: variants})
	require.NoError(t, err)
	const buyers = 300
	bought := make([]string, buyers) // the variant each buyer holds, or "sold_out"
	var switched atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 49))
			left := []string{"S", "M", "L"}
			<-start
			for len(left) > 0 {
				p := rng.IntN(len(left))
				v := left[p]
				req := reserveReq(sale.ID, fmt.Sprintf("c%03d", i), "k-"+v, 1)
				req.Variant = v
				req.Fingerprint = append(req.Fingerprint, "/"+v...)
				res, err := s.Reserve(ctx, req)
				switch {
				case err == nil:
					if res.Reservation.Variant != v {
						t.Errorf("buyer %d asked for %s, was given %q", i, v, res.Reservation.Variant)
					}
					bought[i] = v
					return
				case errors.Is(err, flashline.ErrVariantSoldOut):
					switched.Add(1)
					left = append(left[:p], left[p+1:]...)
				default:
					t.Errorf("buyer %d, variant %s: %v", i, v, err)
					return
				}
			}
			bought[i] = "sold_out"
		})
	}
	close(start)
	wg.Wait()
	count := map[string]int{}
	for _, b := range bought {
		count[b]++
	}
	t.Logf("race of variants: %v, %d variant_sold_out answers", count, switched.Load())
	require.Equal(t, map[string]int{"S": 10, "M": 30, "L": 80, "sold_out": buyers - 120}, count)
	got := requireInvariant(t, s, sale.ID)
	require.Equal(t, 0, got.Available)
	require.Equal(t, 120, got.Pending)
	require.Len(t, got.Variants, len(variants))
	for i, v := range got.Variants {
		require.Equal(t, variants[i].SKU, v.SKU)
		require.True(t, v.OK, "variant %s: %+v", v.SKU, v)
		require.Equal(t, 0, v.Available, "variant %s", v.SKU)
		require.Equal(t, variants[i].Stock, v.Pending, "variant %s", v.SKU)
	}
	// One reservation per customer, in the variant its 201 named (its
	// bucket's: bucket / 64 is the variant's position).
	rows, err := pool.Query(ctx, `SELECT r.customer_id, count(*), min(v.sku) FROM reservations r
		JOIN sale_variants v ON v.sale_id = r.sale_id AND v.position = r.bucket / 64
		WHERE r.sale_id = $1 GROUP BY 1`, sale.ID)
	require.NoError(t, err)
	held := map[string]string{}
	for rows.Next() {
		var customer, sku string
		var n int
		require.NoError(t, rows.Scan(&customer, &n, &sku))
		require.Equal(t, 1, n, "customer %s holds %d reservations", customer, n)
		held[customer] = sku
	}
	require.NoError(t, rows.Err())
	for i, b := range bought {
		if b != "sold_out" {
			require.Equal(t, b, held[fmt.Sprintf("c%03d", i)], "buyer %d", i)
		}
	}
	require.Len(t, held, 120)
}

// requireReplays: req's key replays receipt byte for byte, on the purchase
// path and the gate's.
func requireReplays(t *testing.T, s *postgres.Store, req flashline.ReserveRequest, receipt []byte) {
	t.Helper()
	again, err := s.Reserve(context.Background(), req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, string(receipt), string(again.Receipt))
	stored, ok, err := s.StoredAnswer(context.Background(), req)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, string(receipt), string(stored.Receipt))
}

// storeKeysAsBefore moves the keys of a sale's reservations into
// idempotency_keys, as the version before migration 000017 stored them (and
// as its down migration puts them back).
func storeKeysAsBefore(t *testing.T, pool *pgxpool.Pool, saleID string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO idempotency_keys (customer_id, key, sale_id, request_hash, status_code, reservation_id, receipt_expires_at, created_at)
SELECT customer_id, idempotency_key, sale_id, request_hash, 201, reservation_id, receipt_expires_at, created_at
  FROM reservations WHERE sale_id = $1 AND request_hash IS NOT NULL`, saleID)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `UPDATE reservations SET request_hash = NULL, receipt_expires_at = NULL WHERE sale_id = $1`, saleID)
	require.NoError(t, err)
}

// TestKeyStoredBeforeReplays: a key stored in idempotency_keys (before
// migration 000017, or by the version before it while the service rolls)
// is still found, on the purchase path and the gate's: replayed byte for
// byte, or idempotency_key_reused for another request.
func TestKeyStoredBeforeReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale := createSale(t, s, 5, 1)
	first, err := s.Reserve(ctx, reserveReq(sale.ID, "olga", "k1", 1))
	require.NoError(t, err)
	storeKeysAsBefore(t, pool, sale.ID)

	requireReplays(t, s, reserveReq(sale.ID, "olga", "k1", 1), first.Receipt)
	_, err = s.Reserve(ctx, reserveReq(sale.ID, "olga", "k1", 2))
	require.ErrorIs(t, err, flashline.ErrIdempotencyKeyReused)
	requireInvariant(t, s, sale.ID)
}

// TestPruneIdempotencyKeys: the prune deletes keys of idempotency_keys
// older than the retention; a key in its reservation's row (migration
// 000017) is kept as long as the reservation and still replays.
func TestPruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale := createSale(t, s, 10, 1)
	for i := range 5 {
		_, err := s.Reserve(ctx, reserveReq(sale.ID, fmt.Sprintf("c%d", i), "k", 1))
		require.NoError(t, err)
	}
	kept := createSale(t, s, 10, 1)
	first, err := s.Reserve(ctx, reserveReq(kept.ID, "c9", "k", 1))
	require.NoError(t, err)
	storeKeysAsBefore(t, pool, sale.ID)
	_, err = pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE customer_id <> 'c0'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE reservations SET created_at = now() - interval '25 hours'`)
	require.NoError(t, err)

	deleted, err := s.PruneIdempotencyKeys(ctx, 24*3600, 2) // batches of 2: 2, 2, 0
	require.NoError(t, err)
	require.EqualValues(t, 4, deleted)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&left))
	require.Equal(t, 1, left, "the key younger than the retention stays")
	again, err := s.Reserve(ctx, reserveReq(kept.ID, "c9", "k", 1))
	require.NoError(t, err)
	require.True(t, again.Replayed, "a key in its reservation's row is kept with it")
	require.Equal(t, string(first.Receipt), string(again.Receipt))
	requireInvariant(t, s, sale.ID)
}

// TestKeyMigrationsDown: migration 000017's down (after 000018's, as
// migrate down runs them) puts every key back in idempotency_keys with the
// expiry its receipt first gave (a hold extended since included), and
// 000015's down then writes the body a replay makes (flashline.Receipt's
// JSON, byte for byte), so that a binary from before either replays the same
// answer. Run in a transaction that is rolled back.
func TestKeyMigrationsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	sale := createSale(t, s, 5, 2)
	res, err := s.Reserve(ctx, reserveReq(sale.ID, "dana", "k1", 2))
	require.NoError(t, err)
	var held struct{ ReservationID string }
	require.NoError(t, json.Unmarshal(res.Receipt, &held))
	_, err = s.ExtendReservation(ctx, held.ReservationID, 120, "ops")
	require.NoError(t, err)
	root, err := testdb.RepoRoot()
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	for _, name := range []string{"000018_sale_reservations_by_state.down.sql", "000017_key_in_reservation.down.sql", "000015_receipt_from_reservation.down.sql"} {
		down, err := os.ReadFile(filepath.Join(root, "migrations", name))
		require.NoError(t, err)
		_, err = tx.Exec(ctx, string(down))
		require.NoError(t, err, name)
	}
	var body []byte
	require.NoError(t, tx.QueryRow(ctx, `SELECT response_body FROM idempotency_keys WHERE customer_id = 'dana' AND key = 'k1'`).Scan(&body))
	require.Equal(t, string(res.Receipt), string(body))
}
