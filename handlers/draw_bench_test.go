package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/postgres"
)

// BenchmarkDrawTranscript: GET /sales/{id}/draw for a ranked crowd of N
// holders (a randomized_at_open room frozen at its open), asked by 8
// clients at once, through the routes (not the contract's checks, which
// would parse every answer). One op is the 8 requests; B/op what they
// allocated together. The suite's run (-benchtime 1x) takes N = 1,000;
// 100,000 is opt-in:
//
//	FLASHLINE_BENCH_CROWD_LARGE=1 go test -run '^$' -bench DrawTranscript -benchtime 5x ./handlers/
func BenchmarkDrawTranscript(b *testing.B) {
	sizes := []int{1_000}
	if os.Getenv("FLASHLINE_BENCH_CROWD_LARGE") != "" {
		sizes = []int{100_000}
	}
	const clients = 8
	pool, _ := testdb.NewPool(b)
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	limiter, err := loadshed.New(loadshed.Options{InitialLimit: 200, MinLimit: 200, MaxLimit: 200})
	require.NoError(b, err)
	h := handlers.Routes(handlers.Deps{Store: store, Refusals: flashline.NewRefusals(store, nil), Limiter: limiter,
		Logger: testLogger(b), Ready: func(context.Context) error { return nil }, Registry: prometheus.NewRegistry()})
	ctx := context.Background()
	for _, n := range sizes {
		opens := time.Now().Add(time.Hour)
		sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_draw_bench", InitialStock: 10,
			Admission: flashline.AdmissionWaitingRoom, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
		require.NoError(b, err)
		_, err = pool.Exec(ctx, `INSERT INTO waitroom_holders (sale_id, customer_id)
			SELECT $1, 'cust_' || md5(g::text) FROM generate_series(1, $2::int) g`, sale.ID, n)
		require.NoError(b, err)
		_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = now() - interval '1 second' WHERE sale_id = $1`, sale.ID)
		require.NoError(b, err)
		_, _, err = store.LeasePositions(ctx, sale.ID, 1, 0)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("holders=%d/clients=%d", n, clients), func(b *testing.B) {
			b.ReportAllocs()
			size := 0
			for b.Loop() {
				var wg sync.WaitGroup
				sizes := make([]int, clients)
				for i := range clients {
					wg.Go(func() {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/sales/"+sale.ID+"/draw", nil))
						if w.Code == http.StatusOK {
							sizes[i] = w.Body.Len()
						}
					})
				}
				wg.Wait()
				for _, s := range sizes {
					require.NotZero(b, s, "a request was not answered 200")
					size = s
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/clients, "ms/request")
			b.ReportMetric(float64(size)/1e6, "doc-MB")
		})
	}
}
