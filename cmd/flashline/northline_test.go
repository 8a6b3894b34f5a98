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

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testpgbouncer"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestNorthline replays the Northline case study with Northline's own
// topology: six `flashline serve` processes with default flags on a
// PostgreSQL of its own with a default server's max_connections (100),
// spoken to only through the HTTP contract. Besides the case's checks, no
// connection is ever refused by the server, its backends stay under its
// limit, and no answer says the sale is paused.
func TestNorthline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster and flashline serve processes: not in -short")
	}
	t.Parallel()
	cluster := testdb.StartCluster(t, 100)
	n := northline{c: testserver.NewClient(), checkouts: 9000, variantCheckouts: 1200}
	n.pool = cluster.Pool(t)
	n.servers = testserver.StartN(t, 6, cluster.URL)
	peak := watchBackends(t, n.pool)
	n.run(t)
	p := peak()
	refused := strings.Count(cluster.Log(), "too many clients already") + strings.Count(cluster.Log(), "remaining connection slots are reserved")
	t.Logf("six instances, default flags, max_connections 100: peak backends %d, refused connections %d", p, refused)
	require.Zero(t, refused, "connections refused by the server")
	require.Less(t, p, 100)
}

// TestNorthlineThroughPgBouncer runs the same checks on six instances that
// reach the database through one PgBouncer in transaction pooling mode with
// 20 server connections (--database-url), and the server itself for what
// needs a session (--database-direct-url).
func TestNorthlineThroughPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pgbouncer and flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	bouncer := testpgbouncer.Start(t, dbURL, 20)
	n := northline{c: testserver.NewClient(), checkouts: 3000}
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	n.pool = pool
	n.servers = testserver.StartN(t, 6, bouncer.URL(dbURL), "--database-direct-url", dbURL)
	n.run(t)
}

// northline is the case study's checks against instances sharing one
// database, however they reach it.
type northline struct {
	servers   []*testserver.Server
	pool      *pgxpool.Pool // direct, for the checks
	c         *testserver.Client
	checkouts int // of the retry storm
	// variantCheckouts: the retry storm on a sale with variants, driven by
	// the load generator (0: not run).
	variantCheckouts int
}

func (n northline) run(t *testing.T) {
	c, pool, servers := n.c, n.pool, n.servers
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
		// n.checkouts checkouts. About 15% of first attempts are abandoned by the
		// client after a few milliseconds and retried with the same key; 10%
		// of successes are retried again. One reservation per key, and every
		// answer for a key is byte for byte the same.
		checkouts := n.checkouts
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
			checkouts, elapsed.Round(time.Millisecond), float64(checkouts)/elapsed.Seconds(), abandoned.Load(), replays.Load(), inProgress.Load(), overloaded.Load(), failClosed.Load())

		var reservations, keys, dupKeys int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE sale_id = $1`, sale).Scan(&reservations))
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(request_hash) FROM reservations WHERE sale_id = $1`, sale).Scan(&keys))
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM (SELECT customer_id, idempotency_key FROM reservations WHERE sale_id = $1
			  GROUP BY 1, 2 HAVING count(*) > 1) d`, sale).Scan(&dupKeys))
		require.Equal(t, checkouts, reservations, "one reservation per checkout")
		require.Equal(t, checkouts, keys)
		require.Zero(t, dupKeys)
		require.Positive(t, replays.Load())
		require.Zero(t, failClosed.Load(), "answers that said the sale was paused while it was open and the database up")
		for i, b := range bodies {
			// The key's reservation is the answer's, and the expiry it first
			// gave is the answer's: what a replay makes the receipt from again.
			var v struct {
				ReservationID string
				ExpiresAt     time.Time
			}
			require.NoError(t, json.Unmarshal(b, &v), "checkout %d", i)
			var id string
			var expires time.Time
			require.NoError(t, pool.QueryRow(context.Background(),
				`SELECT reservation_id, receipt_expires_at FROM reservations
				  WHERE customer_id = $1 AND idempotency_key = $2 AND request_hash IS NOT NULL`,
				fmt.Sprintf("storm-%04d", i), fmt.Sprintf("key-%04d", i)).Scan(&id, &expires))
			require.Equal(t, v.ReservationID, id, "checkout %d", i)
			require.True(t, v.ExpiresAt.Equal(expires), "checkout %d: the answer's expiry %v, the key's %v", i, v.ExpiresAt, expires)
		}
		requireStock(t, pool, sale, 0, checkouts)
	})

	if n.variantCheckouts > 0 {
		t.Run("RetryStormOfVariants", func(t *testing.T) { n.retryStormOfVariants(t) })
	}

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
			ids[i] = reserveHeld(t, c, func(n int) string { return instance(i + n) }, sale, toks[i], "k")
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
	t.Run("ConfirmCancelBurst", func(t *testing.T) { n.confirmCancelBurst(t) })
}

// confirmCancelBurst is a store's own calls at once: 30 holds, each
// confirmed 3 times and cancelled 5 times, across the instances. Every
// answer is kept, the ones retried included: none may say the sale is
// paused (it is open, and the database up), each hold ends confirmed (one
// order) or cancelled (its unit back once), never both.
func (n northline) confirmCancelBurst(t *testing.T) {
	const holds = 30
	c, servers := n.c, n.servers
	instance := func(i int) string { return servers[i%len(servers)].URL }
	sale := c.CreateSale(t, instance(0), fmt.Sprintf(`{"sku":"sku_store","initialStock":%d,"perCustomerLimit":1,"confirmation":"customer"}`, holds))
	ids, toks := make([]string, holds), make([]string, holds)
	for i := range ids {
		toks[i] = testserver.Token(t, fmt.Sprintf("store-%02d", i))
		ids[i] = reserveHeld(t, c, func(n int) string { return instance(i + n) }, sale, toks[i], "k")
	}
	var mu sync.Mutex
	answers := map[string]int{}
	orders := make([]sync.Map, holds)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		for j := range 8 {
			action := "cancel"
			if j < 3 {
				action = "confirm"
			}
			wg.Go(func() {
				<-start
				r := retryShed(t, func(attempt int) (testserver.Response, error) {
					r, err := c.Do(context.Background(), http.MethodPost, instance(i*8+j+attempt)+"/reservations/"+id+"/"+action, toks[i], "")
					if err == nil {
						mu.Lock()
						answers[strings.TrimSpace(fmt.Sprintf("%s %d %s", action, r.Status, errorCode(r.Body)))]++
						mu.Unlock()
					}
					return r, err
				})
				switch {
				case r.Status == 200 && action == "confirm":
					var v struct{ OrderID string }
					require.NoError(t, json.Unmarshal(r.Body, &v))
					orders[i].Store(v.OrderID, true)
				case r.Status == 200:
				case r.Status == 409 && (errorCode(r.Body) == "reservation_cancelled" || errorCode(r.Body) == "reservation_confirmed"):
				default:
					t.Errorf("%s %s: %d %s", action, id, r.Status, r.Body)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	t.Logf("confirm/cancel burst (%d holds x 3 confirms + 5 cancels): %v", holds, answers)
	for a := range answers {
		require.NotContains(t, a, "sale_paused_fail_closed", "an answer said the sale was paused: %v", answers)
	}
	var confirmed int
	for i := range orders {
		k := 0
		orders[i].Range(func(any, any) bool { k++; return true })
		require.LessOrEqual(t, k, 1, "one order id per reservation")
		confirmed += k
	}
	var ordered, cancelled int
	require.NoError(t, n.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM orders o JOIN reservations r USING (reservation_id) WHERE r.sale_id = $1`, sale).Scan(&ordered))
	require.NoError(t, n.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM stock_ledger WHERE sale_id = $1 AND reason = 'cancel'`, sale).Scan(&cancelled))
	require.Equal(t, confirmed, ordered)
	require.Equal(t, holds, ordered+cancelled, "every hold ends exactly once")
	requireStock(t, n.pool, sale, cancelled, ordered)
}

// watchBackends samples the server's client backends every 20 ms until the
// function it returns is called, which returns the most seen at once.
func watchBackends(t *testing.T, pool *pgxpool.Pool) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&n); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	stop := func() int { cancel(); <-done; return int(peak.Load()) }
	t.Cleanup(func() { stop() })
	return stop
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

// reserveHeld makes customer's hold with key and returns its reservation
// id, retrying what says "later": a shed 503 or 429 (retryShed), and a 409
// request_in_progress (an earlier attempt with the key, answered 503 after
// its batch's deadline, is still committing).
func reserveHeld(t *testing.T, c *testserver.Client, instance func(int) string, sale, token, key string) string {
	t.Helper()
	for round := 0; ; round++ {
		r := retryShed(t, func(attempt int) (testserver.Response, error) {
			return c.Reserve(context.Background(), instance(round+attempt), sale, token, key, 1)
		})
		if r.Status == http.StatusConflict && errorCode(r.Body) == "request_in_progress" && round < 100 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		require.Equal(t, 201, r.Status, "%s", r.Body)
		var v struct{ ReservationID string }
		require.NoError(t, json.Unmarshal(r.Body, &v))
		return v.ReservationID
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
