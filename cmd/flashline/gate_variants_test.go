package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testredis"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestGateVariants: a gated sale with variants across two serve processes
// and one Redis (issue 49): buyers at once, each trying the variants in a
// random order, buy exactly the stock of the variant that sells out and the
// rest of the other; a variant sold out at its
// counter answers 409 variant_sold_out; the admin's view lists each
// variant's counter, equal to the database's, with no drift. Every exchange
// is checked against the OpenAPI document.
func TestGateVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes and redis-server: not in -short")
	}
	rs := testredis.Start(t)
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	servers := testserver.StartN(t, 2, dbURL, "--redis-url", rs.URL)
	c := testserver.NewClient()
	instance := func(i int) string { return servers[i%len(servers)].URL }

	sale := c.CreateSale(t, instance(0), `{"sku":"sku_gv","perCustomerLimit":1,"gate":"redis",
		"variants":[{"sku":"S","stock":15},{"sku":"M","stock":100,"buckets":2}]}`)
	skus := []string{"S", "M"}
	const buyers = 60
	bought := make([]string, buyers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buyers {
		wg.Go(func() {
			tok := testserver.Token(t, fmt.Sprintf("gv-%03d", i))
			rng := rand.New(rand.NewPCG(uint64(i), 28))
			<-start
			for _, p := range rng.Perm(len(skus)) {
				v := skus[p]
				r := retryShed(t, func(attempt int) (testserver.Response, error) {
					r, err := c.To(instance(i+attempt)).Reserve(context.Background(), tok,
						client.ReserveRequest{SaleID: sale, IdempotencyKey: "k-" + v, Quantity: 1, Variant: v})
					return r.Response, err
				})
				switch code := variantsErrorCode(r.Body); {
				case r.Status == http.StatusCreated:
					bought[i] = v
					return
				case r.Status == http.StatusConflict && code == "variant_sold_out":
				default:
					t.Errorf("buyer %d, variant %s: %d %s", i, v, r.Status, r.Body)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	count := map[string]int{}
	for _, v := range bought {
		count[v]++
	}
	// S sells out (more than 15 buyers try it first: the seeds are fixed),
	// and its late buyers take M; M does not sell out, nor does the sale.
	require.Equal(t, map[string]int{"S": 15, "M": buyers - 15}, count)

	// Sold out at its counter: 409 variant_sold_out, as without the gate
	// (the sale is not sold out: M has units).
	r, err := c.To(instance(1)).Reserve(context.Background(), testserver.Token(t, "gv-late"),
		client.ReserveRequest{SaleID: sale, IdempotencyKey: "k", Quantity: 1, Variant: "S"})
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	require.Equal(t, "variant_sold_out", variantsErrorCode(r.Body))

	v := waitGate(t, c, instance(1), sale, func(v saleGate) bool { return *v.Gate.OK && *v.Gate.Counter == 100-(buyers-15) })
	require.Equal(t, []api.GateVariant{{SKU: "S", Counter: 0, Drift: 0}, {SKU: "M", Counter: 100 - (buyers - 15), Drift: 0}}, v.Gate.Variants)
	// The console's sale page shows each variant's counter and drift.
	page, err := c.Do(context.Background(), http.MethodGet, instance(1)+"/admin/sales/"+sale, testserver.AdminToken, "", "Accept", "text/html")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, page.Status, "%s", page.Body)
	require.Contains(t, string(page.Body), `<tr data-sku="S"><th>S</th><td class="g-v-counter">0</td><td class="g-v-drift">0</td></tr>`)
	require.Contains(t, string(page.Body), fmt.Sprintf(`<tr data-sku="M"><th>M</th><td class="g-v-counter">%d</td><td class="g-v-drift">0</td></tr>`, 100-(buyers-15)))
	rows, err := pool.Query(context.Background(), `SELECT sku, pending FROM sale_variant_invariant WHERE sale_id = $1`, sale)
	require.NoError(t, err)
	pending := map[string]int{}
	for rows.Next() {
		var sku string
		var n int
		require.NoError(t, rows.Scan(&sku, &n))
		pending[sku] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"S": 15, "M": buyers - 15}, pending)
	require.Empty(t, incidentKinds(t, pool, sale))
}
