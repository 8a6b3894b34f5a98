package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestVariantsDrop is issue 49's drop: 3 variants × 100 units, 1,000
// shoppers through one waiting room of a real `serve`, each choosing a
// variant at random once admitted and switching when theirs is gone.
// Exactly 300 sold, 100 of each, no shopper with two reservations, and a
// waiter told sold_out only in an answer where every variant is sold out.
func TestVariantsDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL)
	c := testserver.NewClient()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	sale := c.CreateSale(t, srv.URL, `{"sku":"drop-1","admission":"waiting_room","perCustomerLimit":1,
		"variants":[{"sku":"S","stock":100},{"sku":"M","title":"Medium","stock":100,"buckets":2},{"sku":"L","stock":100}]}`)
	opened, err := c.To(srv.URL).OpenSale(context.Background(), testserver.AdminToken, sale)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, opened.Status, "%s", opened.Body)

	skus := []string{"S", "M", "L"}
	const shoppers = 1000
	var (
		bought        = make([]string, shoppers) // the variant each got ("": none)
		toldSoldOut   atomic.Int64
		earlySoldOut  atomic.Int64 // sold_out answers naming a variant not sold out
		variantGone   atomic.Int64
		attemptsTotal atomic.Int64
	)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range shoppers {
		wg.Go(func() {
			<-start
			to := c.To(srv.URL)
			jwt := testserver.Token(t, fmt.Sprintf("shopper-%04d", i))
			rng := rand.New(rand.NewPCG(uint64(i), 49))
			ctx := context.Background()
			ticket := ""
			for ticket == "" {
				r, err := to.Ticket(ctx, jwt, sale, "")
				if err != nil {
					// No answer in the client's time (a busy machine): a
					// shopper's app asks again.
					time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
					continue
				}
				if r.Status == http.StatusOK {
					ticket = r.Value.Token
					continue
				}
				if r.Status == http.StatusConflict {
					// The sale sold out before this shopper had a place (a
					// busy machine answered its asks 503 or 429 until
					// then): told sold_out at the door, which is right only
					// once every variant is gone. Units only go down in
					// this drop, so the database says so too by then.
					require.Contains(t, string(r.Body), `"sold_out"`)
					toldSoldOut.Add(1)
					var left int64
					require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(available), 0) FROM sale_variant_invariant WHERE sale_id = $1`, sale).Scan(&left))
					if left > 0 {
						earlySoldOut.Add(1)
					}
					return
				}
				require.Contains(t, []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}, r.Status, "%s", r.Body)
				time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
			}
			gone := map[string]bool{}
			for {
				r, err := to.Status(ctx, jwt, sale, ticket, "")
				if err != nil {
					time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
					continue
				}
				if r.Status != http.StatusOK {
					require.Contains(t, []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}, r.Status, "%s", r.Body)
					time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
					continue
				}
				st := r.Value
				require.Len(t, st.Variants, 3, "every status answer of the sale lists its variants: %s", r.Body)
				for _, v := range st.Variants {
					require.Contains(t, []string{"available", "few_left", "sold_out"}, v.Availability)
					if v.Availability == "sold_out" {
						gone[v.SKU] = true
					}
				}
				switch st.State {
				case "sold_out":
					toldSoldOut.Add(1)
					if !allSoldOut(st.Variants) {
						earlySoldOut.Add(1)
					}
					return
				case "admitted":
					if variant, ok := buyAnyVariant(t, to, jwt, sale, st.AdmissionToken, skus, gone, rng, &variantGone, &attemptsTotal); ok {
						bought[i] = variant
						return
					}
					// Every variant answered variant_sold_out: ask the room,
					// which says sold_out once it has read the stock.
					time.Sleep(200 * time.Millisecond)
				default:
					poll := time.Second
					if st.PollAfterMs != nil {
						poll = min(time.Duration(*st.PollAfterMs)*time.Millisecond, 2*time.Second)
					}
					time.Sleep(poll)
				}
			}
		})
	}
	close(start)
	wg.Wait()

	per := map[string]int{}
	for _, v := range bought {
		if v != "" {
			per[v]++
		}
	}
	t.Logf("variants drop: sold %v; told sold_out %d; variant_sold_out answers %d; reservation attempts %d",
		per, toldSoldOut.Load(), variantGone.Load(), attemptsTotal.Load())
	require.Equal(t, map[string]int{"S": 100, "M": 100, "L": 100}, per, "each variant sold exactly")
	require.Zero(t, earlySoldOut.Load(), "a waiter told sold_out while a variant had units")

	var reservations, customers int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT customer_id) FROM reservations WHERE sale_id = $1`, sale).Scan(&reservations, &customers))
	require.Equal(t, 300, reservations)
	require.Equal(t, 300, customers, "no shopper with two reservations")
	rows, err := pool.Query(context.Background(),
		`SELECT sku, available, pending + confirmed, ok FROM sale_variant_invariant WHERE sale_id = $1 ORDER BY position`, sale)
	require.NoError(t, err)
	for rows.Next() {
		var sku string
		var available, held int64
		var ok bool
		require.NoError(t, rows.Scan(&sku, &available, &held, &ok))
		require.Equal(t, int64(0), available, sku)
		require.Equal(t, int64(100), held, sku)
		require.True(t, ok, "the invariant of variant %s", sku)
	}
	require.NoError(t, rows.Err())
	requireStock(t, pool, sale, 0, 300)
}

// buyAnyVariant reserves one unit with an admission token: a variant at
// random among those not known gone, the next on variant_sold_out, until
// one is held (its SKU, true) or every one is gone.
func buyAnyVariant(t *testing.T, to *client.Client, jwt, sale, admission string, skus []string, gone map[string]bool,
	rng *rand.Rand, variantGone, attempts *atomic.Int64) (string, bool) {
	t.Helper()
	left := slices.DeleteFunc(slices.Clone(skus), func(s string) bool { return gone[s] })
	rng.Shuffle(len(left), func(i, j int) { left[i], left[j] = left[j], left[i] })
	for _, v := range left {
		for {
			attempts.Add(1)
			r, err := to.Reserve(context.Background(), jwt, client.ReserveRequest{SaleID: sale, Quantity: 1, Variant: v,
				IdempotencyKey: "buy-" + v + "-" + admission[len(admission)-12:], AdmissionToken: admission})
			if err != nil {
				// No answer in the client's time: asked again with the
				// same key, as a mobile client retries, which the key
				// makes one reservation however often it is sent.
				time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
				continue
			}
			switch code := variantsErrorCode(r.Body); {
			case r.Status == http.StatusCreated:
				// The receipt, first or replayed, names the variant.
				require.Equal(t, v, r.Value.Variant, "%s", r.Body)
				return v, true
			case r.Status == http.StatusServiceUnavailable || r.Status == http.StatusTooManyRequests ||
				code == "request_in_progress":
				time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
				continue
			case code == "variant_sold_out" || code == "sold_out":
				variantGone.Add(1)
				gone[v] = true
			default:
				t.Errorf("reserve %s: %d %s", v, r.Status, r.Body)
				return "", false
			}
			break
		}
	}
	return "", false
}

func allSoldOut(vs []api.VariantAvailability) bool {
	for _, v := range vs {
		if v.Availability != "sold_out" {
			return false
		}
	}
	return true
}

func variantsErrorCode(body []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}
