package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// TestCoalescedReserveUnderContention: several stores (as several instances)
// share one database and coalesce a crowd of concurrent requests — retries of
// one key, customers trying several keys at once — for one hot row. Exactly
// the stock is sold, each customer holds at most one reservation, every
// retry of a key gets the same answer, and the batches did gather requests.
func TestCoalescedReserveUnderContention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	var maxBatch atomic.Int64
	stores := make([]*postgres.Store, 3)
	for i := range stores {
		stores[i] = postgres.NewStore(postgres.SinglePool(pool), postgres.Options{OnBatch: func(n int) {
			for {
				m := maxBatch.Load()
				if int64(n) <= m || maxBatch.CompareAndSwap(m, int64(n)) {
					return
				}
			}
		}})
	}
	const stock, customers = 60, 150
	sale := createSale(t, stores[0], stock, 1)

	type answer struct {
		customer, key string
		body          []byte
		err           error
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []answer
	)
	for c := range customers {
		// Each customer sends its key three times at once (a retrying
		// client) and a second key once (a second tab).
		for a := range 4 {
			key := "k1"
			if a == 3 {
				key = "k2"
			}
			wg.Go(func() {
				s := stores[(c+a)%len(stores)]
				customer := fmt.Sprintf("crowd-%03d", c)
				var res flashline.ReserveResult
				var err error
				for {
					res, err = s.Reserve(ctx, reserveReq(sale.ID, customer, key, 1))
					if !errors.Is(err, flashline.ErrRequestInProgress) {
						break
					}
				}
				mu.Lock()
				answers = append(answers, answer{customer, key, res.Receipt, err})
				mu.Unlock()
			})
		}
	}
	wg.Wait()

	held := map[string]string{}   // customer → key that holds
	bodies := map[string][]byte{} // customer/key → body
	for _, a := range answers {
		switch {
		case a.err == nil:
			if k, ok := held[a.customer]; ok {
				require.Equal(t, k, a.key, "customer %s holds with two keys", a.customer)
			}
			held[a.customer] = a.key
			if b, ok := bodies[a.customer+"/"+a.key]; ok {
				require.Equal(t, b, a.body, "retry of %s/%s answered differently", a.customer, a.key)
			}
			bodies[a.customer+"/"+a.key] = a.body
		case errors.Is(a.err, flashline.ErrSoldOut), errors.Is(a.err, flashline.ErrLimitReached):
		default:
			t.Fatalf("%s/%s: %v", a.customer, a.key, a.err)
		}
	}
	require.Len(t, held, stock)
	got := requireInvariant(t, stores[0], sale.ID)
	require.Equal(t, 0, got.Available)
	require.Equal(t, stock, got.Pending)
	require.Greater(t, maxBatch.Load(), int64(1), "no batch ever held more than one request")
	t.Logf("largest batch: %d", maxBatch.Load())
}

// BenchmarkReserveHotRow: reservations on one hot stock row from many
// goroutines through one store, coalesced (the default) and one transaction
// per reservation (MaxBatch 1). Reports reservations/s and the mean batch.
//
//	go test -run '^$' -bench ReserveHotRow -benchtime 3s ./postgres/
func BenchmarkReserveHotRow(b *testing.B) {
	for _, maxBatch := range []int{64, 1} {
		b.Run(fmt.Sprintf("max-batch=%d", maxBatch), func(b *testing.B) {
			ctx := context.Background()
			pool, _ := testdb.NewPool(b)
			var batches, requests atomic.Int64
			s := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{
				MaxBatch: maxBatch,
				OnBatch:  func(n int) { batches.Add(1); requests.Add(int64(n)) },
			})
			sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "sku_bench", InitialStock: 100_000_000, PerCustomerLimit: 1, ReservationTTLSeconds: 3600})
			require.NoError(b, err)
			var seq atomic.Int64
			b.SetParallelism(64) // 64 × GOMAXPROCS concurrent buyers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Reserve(ctx, reserveReq(sale.ID, fmt.Sprintf("b-%d", seq.Add(1)), "k", 1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
			if n := batches.Load(); n > 0 {
				b.ReportMetric(float64(requests.Load())/float64(n), "batch")
			}
		})
	}
}

// TestBucketsNeverSoldOutWhileStockRemains: as many customers as units,
// spread over 8 buckets, all at once through three stores. Any sold_out
// answered while some bucket still held a unit would leave that unit unsold.
func TestBucketsNeverSoldOutWhileStockRemains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	stores := []*postgres.Store{postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}), postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}), postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})}
	const units = 90
	sale, err := stores[0].CreateSale(ctx, flashline.NewSale{SKU: "sku_buckets", InitialStock: units, PerCustomerLimit: 1, ReservationTTLSeconds: 600, Buckets: 8})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, units)
	for i := range units {
		wg.Go(func() {
			for {
				_, err := stores[i%len(stores)].Reserve(ctx, reserveReq(sale.ID, fmt.Sprintf("bucket-buyer-%d", i), "k", 1))
				if !errors.Is(err, flashline.ErrRequestInProgress) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := requireInvariant(t, stores[0], sale.ID)
	require.Equal(t, 0, got.Available)
	require.Equal(t, units, got.Pending)
}
