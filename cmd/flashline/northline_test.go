package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/internal/testserver"
)

// TestNorthline replays the Northline case study against six `flashline
// serve` processes sharing one database, each with 20 purchase-path
// connections, spoken to only through the HTTP contract.
func TestNorthline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	servers := testserver.StartN(t, 6, dbURL, "--sale-pool-size", "20", "--admin-pool-size", "3", "--river-pool-size", "3")
	c := testserver.NewClient()
	instance := func(i int) string { return servers[i%len(servers)].URL }

	t.Run("Race", func(t *testing.T) {
		// 500 concurrent buyers, 200 units: exactly 200 reservations.
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_991","initialStock":200,"perCustomerLimit":1}`)
		start := make(chan struct{})
		statuses := make([]int, 500)
		codes := make([]string, 500)
		var retried atomic.Int64
		var wg sync.WaitGroup
		for i := range 500 {
			wg.Go(func() {
				tok := testserver.Token(t, fmt.Sprintf("buyer-%03d", i))
				<-start
				r := retryShed(t, func(attempt int) (testserver.Response, error) {
					if attempt > 0 {
						retried.Add(1)
					}
					return c.Reserve(context.Background(), instance(i+attempt), sale, tok, "checkout-1", 1)
				})
				statuses[i], codes[i] = r.Status, errorCode(r.Body)
			})
		}
		close(start)
		wg.Wait()
		count := map[string]int{}
		for i := range statuses {
			count[strings.TrimSpace(fmt.Sprintf("%d %s", statuses[i], codes[i]))]++
		}
		t.Logf("race: %v, after %d retries of a 503", count, retried.Load())
		if count["0"] > 0 {
			t.Logf("server 0 log:\n%s", servers[0].Logs())
		}
		require.Equal(t, map[string]int{"201": 200, "409 sold_out": 300}, count)
		requireStock(t, pool, sale, 0, 200)
	})

	t.Run("RetryStorm", func(t *testing.T) {
		// 9,000 checkouts. About 15% of first attempts are abandoned by the
		// client after a few milliseconds and retried with the same key; 10%
		// of successes are retried again. One reservation per key, and every
		// answer for a key is byte for byte the same.
		const checkouts = 9000
		sale := c.CreateSale(t, instance(0), fmt.Sprintf(`{"sku":"sku_storm","initialStock":%d,"perCustomerLimit":1}`, checkouts))
		var abandoned, replays, inProgress, overloaded, failClosed atomic.Int64
		bodies := make([][]byte, checkouts)
		jobs := make(chan int)
		var wg sync.WaitGroup
		for range 96 {
			wg.Go(func() {
				for i := range jobs {
					tok := testserver.Token(t, fmt.Sprintf("storm-%04d", i))
					key := fmt.Sprintf("key-%04d", i)
					rng := rand.New(rand.NewPCG(uint64(i), 7))
					for attempt := 0; ; attempt++ {
						ctx, cancel := context.WithCancel(context.Background())
						if attempt == 0 && rng.Float64() < 0.15 {
							abandoned.Add(1)
							ctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(4))*time.Millisecond)
						}
						r, err := c.Reserve(ctx, instance(i+attempt), sale, tok, key, 1)
						cancel()
						switch {
						case err != nil && errors.Is(err, context.DeadlineExceeded):
							continue // the client gave up; retry with the same key
						case err != nil:
							t.Errorf("checkout %d: %v", i, err)
							return
						case r.Status == http.StatusConflict && errorCode(r.Body) == "request_in_progress":
							inProgress.Add(1)
							require.NotEmpty(t, r.Header.Get("Retry-After"))
							time.Sleep(5 * time.Millisecond)
							continue
						case r.Status == http.StatusServiceUnavailable:
							if errorCode(r.Body) == "overloaded" {
								overloaded.Add(1)
							} else {
								failClosed.Add(1)
							}
							time.Sleep(10 * time.Millisecond)
							continue
						case r.Status != http.StatusCreated:
							t.Errorf("checkout %d: %d %s", i, r.Status, r.Body)
							return
						}
						if bodies[i] != nil && !bytes.Equal(bodies[i], r.Body) {
							t.Errorf("checkout %d: replay differs:\n%s\n%s", i, bodies[i], r.Body)
						}
						if r.Header.Get("Idempotent-Replayed") == "true" {
							replays.Add(1)
						}
						if bodies[i] == nil {
							bodies[i] = r.Body
							if rng.Float64() < 0.10 {
								continue // retried after success: must replay
							}
						}
						break
					}
				}
			})
		}
		started := time.Now()
		for i := range checkouts {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		elapsed := time.Since(started)
		t.Logf("retry storm: %d checkouts in %v (%.0f/s) across 6 instances; abandoned first attempts %d, replays %d, request_in_progress %d, shed %d, fail-closed %d",
			checkouts, elapsed.Round(time.Millisecond), checkouts/elapsed.Seconds(), abandoned.Load(), replays.Load(), inProgress.Load(), overloaded.Load(), failClosed.Load())

		var reservations, keys, dupKeys int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE sale_id = $1`, sale).Scan(&reservations))
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE sale_id = $1`, sale).Scan(&keys))
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM (SELECT customer_id, idempotency_key FROM reservations WHERE sale_id = $1
			  GROUP BY 1, 2 HAVING count(*) > 1) d`, sale).Scan(&dupKeys))
		require.Equal(t, checkouts, reservations, "one reservation per checkout")
		require.Equal(t, checkouts, keys)
		require.Zero(t, dupKeys)
		require.Positive(t, replays.Load())
		for i, b := range bodies {
			var v struct{ ReservationID string }
			require.NoError(t, json.Unmarshal(b, &v), "checkout %d", i)
			var stored []byte
			require.NoError(t, pool.QueryRow(context.Background(),
				`SELECT response_body FROM idempotency_keys WHERE customer_id = $1 AND key = $2`,
				fmt.Sprintf("storm-%04d", i), fmt.Sprintf("key-%04d", i)).Scan(&stored))
			require.Equal(t, string(stored), string(b))
		}
		requireStock(t, pool, sale, 0, checkouts)
	})

	t.Run("SameKeyBurst", func(t *testing.T) {
		// 30 identical requests at once, spread over the six instances: one
		// reservation; the others replay it or are told to retry (too many
		// in flight for one customer, or still in progress).
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_burst","initialStock":10,"perCustomerLimit":1}`)
		tok := testserver.Token(t, "bursty")
		start := make(chan struct{})
		results := make([]testserver.Response, 30)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				<-start
				results[i] = retryShed(t, func(attempt int) (testserver.Response, error) {
					return c.Reserve(context.Background(), instance(i+attempt), sale, tok, "same-key", 1)
				})
			})
		}
		close(start)
		wg.Wait()
		var created, replayed, busy int
		var body []byte
		for _, r := range results {
			switch {
			case r.Status == 201 && r.Header.Get("Idempotent-Replayed") == "true":
				replayed++
			case r.Status == 201:
				created++
				body = r.Body
			case r.Status == 409 && errorCode(r.Body) == "request_in_progress":
				require.NotEmpty(t, r.Header.Get("Retry-After"))
				busy++
			default:
				t.Fatalf("unexpected answer %d %s", r.Status, r.Body)
			}
		}
		require.Equal(t, 1, created)
		for _, r := range results {
			if r.Status == 201 {
				require.Equal(t, string(body), string(r.Body))
			}
		}
		t.Logf("same-key burst: 1 created, %d replayed, %d request_in_progress", replayed, busy)
		requireStock(t, pool, sale, 9, 1)
	})

	t.Run("CancelConfirmHammer", func(t *testing.T) {
		// Confirm and cancel hammered at once on every instance: each
		// reservation ends confirmed (one order) or cancelled (stock back
		// exactly once), never both.
		const holds = 40
		sale := c.CreateSale(t, instance(0), fmt.Sprintf(`{"sku":"sku_hammer","initialStock":%d,"perCustomerLimit":1,"confirmation":"customer"}`, holds))
		ids := make([]string, holds)
		toks := make([]string, holds)
		for i := range ids {
			toks[i] = testserver.Token(t, fmt.Sprintf("hammer-%02d", i))
			r := retryShed(t, func(attempt int) (testserver.Response, error) {
				return c.Reserve(context.Background(), instance(i+attempt), sale, toks[i], "k", 1)
			})
			require.Equal(t, 201, r.Status, "%s", r.Body)
			var v struct{ ReservationID string }
			require.NoError(t, json.Unmarshal(r.Body, &v))
			ids[i] = v.ReservationID
		}
		var wg sync.WaitGroup
		orderIDs := make([]sync.Map, holds)
		for i, id := range ids {
			for j := range 12 {
				wg.Go(func() {
					action := "cancel"
					if (i+j)%2 == 0 {
						action = "confirm"
					}
					r := retryShed(t, func(attempt int) (testserver.Response, error) {
						return c.Do(context.Background(), http.MethodPost, instance(j+attempt)+"/reservations/"+id+"/"+action, toks[i], "")
					})
					switch {
					case r.Status == 200 && action == "confirm":
						var v struct{ OrderID string }
						require.NoError(t, json.Unmarshal(r.Body, &v))
						orderIDs[i].Store(v.OrderID, true)
					case r.Status == 200:
					case r.Status == 409 && (errorCode(r.Body) == "reservation_cancelled" || errorCode(r.Body) == "reservation_confirmed"):
					default:
						t.Errorf("%s %s: %d %s", action, id, r.Status, r.Body)
					}
				})
			}
		}
		wg.Wait()
		var confirmed int
		for i := range orderIDs {
			n := 0
			orderIDs[i].Range(func(any, any) bool { n++; return true })
			require.LessOrEqual(t, n, 1, "one order id per reservation")
			confirmed += n
		}
		var orders, cancelLedger int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM orders o JOIN reservations r USING (reservation_id) WHERE r.sale_id = $1`, sale).Scan(&orders))
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM stock_ledger WHERE sale_id = $1 AND reason = 'cancel'`, sale).Scan(&cancelLedger))
		require.Equal(t, confirmed, orders)
		require.Equal(t, holds, orders+cancelLedger, "every hold ends exactly once")
		requireStock(t, pool, sale, cancelLedger, orders)
	})
}

// retryShed sends a request again, as a mobile client would, while the
// answer says "later" and changed nothing (503: shed or failed closed; 429:
// the customer has too many requests in flight), and returns the first other
// answer.
func retryShed(t *testing.T, send func(attempt int) (testserver.Response, error)) testserver.Response {
	t.Helper()
	for attempt := 0; ; attempt++ {
		r, err := send(attempt)
		require.NoError(t, err)
		if (r.Status != http.StatusServiceUnavailable && r.Status != http.StatusTooManyRequests) || attempt == 200 {
			return r
		}
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		time.Sleep(time.Duration(20+rand.IntN(80)) * time.Millisecond)
	}
}

func errorCode(body []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// requireStock checks available and held units (pending + confirmed) of a
// sale, that the invariant holds and that stock never went negative.
func requireStock(t *testing.T, pool *pgxpool.Pool, saleID string, available, held int) {
	t.Helper()
	var gotAvail, pending, confirmed, ledger, minQty int
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT available, pending, confirmed, ledger_total, ok FROM sale_invariant WHERE sale_id = $1`, saleID).
		Scan(&gotAvail, &pending, &confirmed, &ledger, &ok))
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT min(quantity) FROM stock WHERE sale_id = $1`, saleID).Scan(&minQty))
	require.Equal(t, available, gotAvail, "available")
	require.Equal(t, held, pending+confirmed, "pending + confirmed")
	require.True(t, ok, "sale_invariant ok")
	require.GreaterOrEqual(t, minQty, 0)
}
