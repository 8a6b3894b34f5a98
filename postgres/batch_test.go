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
	"github.com/flashline/flashline/internal/testdb"
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
		stores[i] = postgres.NewStore(pool, pool)
		stores[i].OnBatch = func(n int) {
			for {
				m := maxBatch.Load()
				if int64(n) <= m || maxBatch.CompareAndSwap(m, int64(n)) {
					return
				}
			}
		}
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
				answers = append(answers, answer{customer, key, res.Body, err})
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
