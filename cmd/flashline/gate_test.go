package main

import (
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

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testredis"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestGate proves the Redis gate across six `flashline serve` processes
// sharing one database and one Redis the test owns (it kills and restarts
// it), through the HTTP contract only.
func TestGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes and redis-server: not in -short")
	}
	rs := testredis.Start(t)
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	servers := testserver.StartN(t, 6, dbURL, "--redis-url", rs.URL)
	c := testserver.NewClient()
	instance := func(i int) string { return servers[i%len(servers)].URL }

	t.Run("Northline", func(t *testing.T) {
		// 500 buyers, 200 units, a gated sale; a quarter of first attempts
		// are abandoned by the client after a few milliseconds and retried
		// with the same key, on another instance. Exactly 200, one per
		// buyer, and the counter ends where the database does.
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_991","initialStock":200,"perCustomerLimit":1,"gate":"redis"}`)
		start := make(chan struct{})
		statuses := make([]int, 500)
		codes := make([]string, 500)
		var abandoned atomic.Int64
		var wg sync.WaitGroup
		for i := range 500 {
			wg.Go(func() {
				tok := testserver.Token(t, fmt.Sprintf("buyer-%03d", i))
				rng := rand.New(rand.NewPCG(uint64(i), 13))
				<-start
				r := retryShed(t, func(attempt int) (testserver.Response, error) {
					for {
						ctx, cancel := context.WithCancel(context.Background())
						if attempt == 0 && rng.Float64() < 0.25 {
							abandoned.Add(1)
							ctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(4))*time.Millisecond)
						}
						r, err := c.Reserve(ctx, instance(i+attempt), sale, tok, "checkout-1", 1)
						cancel()
						if errors.Is(err, context.DeadlineExceeded) {
							attempt++
							continue
						}
						return r, err
					}
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
		t.Logf("gated race: %v, %d first attempts abandoned; incidents %v", count, abandoned.Load(), incidentKinds(t, pool, sale))
		require.Equal(t, map[string]int{"201": 200, "409 sold_out": 300}, count)
		requireStock(t, pool, sale, 0, 200)
		var dup int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM (SELECT customer_id FROM reservations WHERE sale_id = $1 GROUP BY 1 HAVING count(*) > 1) d`, sale).Scan(&dup))
		require.Zero(t, dup)
		v := waitGate(t, c, instance(1), sale, func(v saleGate) bool { return *v.Gate.OK && *v.Gate.Counter == 0 })
		require.Equal(t, "sold_out", v.State)
	})

	t.Run("RestockReachesTheCounter", func(t *testing.T) {
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_restock","initialStock":2,"perCustomerLimit":1,"gate":"redis"}`)
		var ids []string
		for i := range 2 {
			r, err := c.To(instance(i)).Reserve(context.Background(), testserver.Token(t, fmt.Sprintf("rs-%d", i)),
				client.ReserveRequest{SaleID: sale, IdempotencyKey: "k", Quantity: 1})
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			ids = append(ids, r.Value.ReservationID)
		}
		r, err := c.Reserve(context.Background(), instance(2), sale, testserver.Token(t, "rs-late"), "k", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, r.Status)
		// Cancelled on one instance (twice, on two): the unit reaches the
		// counter once, and the late buyer gets it.
		for i := range 2 {
			r, err := c.To(instance(3+i)).Cancel(context.Background(), testserver.Token(t, "rs-0"), ids[0])
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		}
		waitGate(t, c, instance(0), sale, func(v saleGate) bool { return *v.Gate.OK && *v.Gate.Counter == 1 })
		// Instance 5 made neither cancel: it hears that the sale has a unit
		// again from PostgreSQL's notification (or its once-a-second read),
		// and until then may still say sold_out from memory — a refusal,
		// never a second unit. Each attempt with a key of its own.
		deadline := time.Now().Add(5 * time.Second)
		for attempt := 0; ; attempt++ {
			r, err = c.Reserve(context.Background(), instance(5), sale, testserver.Token(t, "rs-late"), fmt.Sprintf("k2-%d", attempt), 1)
			require.NoError(t, err)
			if r.Status == http.StatusCreated {
				break
			}
			require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
			require.False(t, time.Now().After(deadline), "instance 5 still says %s 5 s after the unit came back", r.Body)
			time.Sleep(20 * time.Millisecond)
		}
		requireStock(t, pool, sale, 0, 2)
	})

	t.Run("RedisDiesThenComesBackEmpty", func(t *testing.T) {
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_down","initialStock":100,"perCustomerLimit":1,"gate":"redis"}`)
		for i := range 30 {
			r, err := c.Reserve(context.Background(), instance(i), sale, testserver.Token(t, fmt.Sprintf("down-%03d", i)), "k", 1)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		}
		rs.Kill()
		// Every instance fails closed (503), until the sale is paused (then
		// 409 sale_not_open). How fast is the gate's bound's to keep
		// (gate.Options.Timeout, TestGateFailsClosedAndRebuilds); here it is
		// only logged, as a busy machine's wall clock says little.
		var slowest time.Duration
		for i := range servers {
			sent := time.Now()
			r, err := c.Reserve(context.Background(), instance(i), sale, testserver.Token(t, fmt.Sprintf("down-x%d", i)), "k", 1)
			slowest = max(slowest, time.Since(sent))
			require.NoError(t, err)
			got := fmt.Sprintf("%d %s", r.Status, errorCode(r.Body))
			require.Contains(t, []string{"503 sale_paused_fail_closed", "409 sale_not_open"}, got, "%s", r.Body)
		}
		t.Logf("Redis dead: the slowest of six instances answered in %v", slowest.Round(time.Millisecond))
		// The gate job pauses the sale with an incident.
		v := waitGate(t, c, instance(2), sale, func(v saleGate) bool { return v.State == "paused" })
		require.Contains(t, v.PauseReason, "gate")
		require.Equal(t, []string{"gate_unreachable"}, incidentKinds(t, pool, sale))
		requireStock(t, pool, sale, 70, 30)

		// Redis comes back, empty: the sale stays paused; resume is refused
		// until the counter is rebuilt from the database.
		rs.Restart()
		// An instance's client may still be dialing the Redis that just came
		// back (a busy machine): 503 says "not now", and an operator asks
		// again, as the test does for up to 5 s.
		untilReachable := func(url string) testserver.Response {
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				r := admin(t, c, http.MethodPost, url)
				if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
					return r
				}
			}
		}
		r := untilReachable(instance(1) + "/admin/sales/" + sale + "/resume")
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		r = untilReachable(instance(1) + "/admin/sales/" + sale + "/gate/rebuild")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.JSONEq(t, `{"counter":70}`, string(r.Body))
		r = untilReachable(instance(4) + "/admin/sales/" + sale + "/resume")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

		// It sells out exactly: 200 new buyers for 70 units, and the 30
		// from before, whose retries replay.
		var created, soldOut, replayed atomic.Int64
		var wg sync.WaitGroup
		for i := range 230 {
			wg.Go(func() {
				id := fmt.Sprintf("down-new-%03d", i)
				if i >= 200 {
					id = fmt.Sprintf("down-%03d", i-200)
				}
				r := retryShed(t, func(attempt int) (testserver.Response, error) {
					return whileNotOpen(t, func() (testserver.Response, error) {
						return c.Reserve(context.Background(), instance(i+attempt), sale, testserver.Token(t, id), "k", 1)
					}), nil
				})
				switch {
				case r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "true":
					replayed.Add(1)
				case r.Status == http.StatusCreated:
					created.Add(1)
				case r.Status == http.StatusConflict && errorCode(r.Body) == "sold_out":
					soldOut.Add(1)
				default:
					t.Errorf("buyer %d: %d %s", i, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			r := admin(t, c, http.MethodGet, instance(0)+"/admin/sales/"+sale)
			t.Logf("incidents %v; sale %s", incidentKinds(t, pool, sale), r.Body)
			for i, s := range servers {
				t.Logf("instance %d:\n%s", i, grepLines(s.Logs(), "gate"))
			}
		}
		// down-000..029 buy again under their key "k": replays.
		require.EqualValues(t, 30, replayed.Load())
		require.EqualValues(t, 70, created.Load())
		require.EqualValues(t, 130, soldOut.Load())
		requireStock(t, pool, sale, 0, 100)
		waitGate(t, c, instance(0), sale, func(v saleGate) bool { return *v.Gate.OK && *v.Gate.Counter == 0 })
	})

	t.Run("CounterLostWhileOpen", func(t *testing.T) {
		// Redis restarts empty between two checks: the counter is missing,
		// buyers are answered 503 and the sale pauses (gate_missing).
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_lost","initialStock":10,"perCustomerLimit":1,"gate":"redis"}`)
		rs.Restart()
		r, err := c.Reserve(context.Background(), instance(3), sale, testserver.Token(t, "lost-1"), "k", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		waitGate(t, c, instance(2), sale, func(v saleGate) bool { return v.State == "paused" })
		require.Contains(t, incidentKinds(t, pool, sale), "gate_missing")
		r = admin(t, c, http.MethodPost, instance(1)+"/admin/sales/"+sale+"/gate/rebuild")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.JSONEq(t, `{"counter":10}`, string(r.Body))
		r = admin(t, c, http.MethodPost, instance(1)+"/admin/sales/"+sale+"/resume")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = whileNotOpen(t, func() (testserver.Response, error) {
			return c.Reserve(context.Background(), instance(3), sale, testserver.Token(t, "lost-1"), "k", 1)
		})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	})

	t.Run("RebuildOnlyWhilePaused", func(t *testing.T) {
		sale := c.CreateSale(t, instance(0), `{"sku":"sku_rb","initialStock":10,"perCustomerLimit":1,"gate":"redis"}`)
		r := admin(t, c, http.MethodPost, instance(0)+"/admin/sales/"+sale+"/gate/rebuild")
		require.Equal(t, http.StatusConflict, r.Status)
		require.Equal(t, "invalid_transition", errorCode(r.Body))
		plain := c.CreateSale(t, instance(0), `{"sku":"sku_rb","initialStock":10,"perCustomerLimit":1}`)
		r = admin(t, c, http.MethodPost, instance(0)+"/admin/sales/"+plain+"/gate/rebuild")
		require.Equal(t, http.StatusBadRequest, r.Status)
		r = admin(t, c, http.MethodGet, instance(0)+"/admin/sales/"+plain)
		require.Contains(t, string(r.Body), `"gate":{"kind":"none"}`)
	})
}

// TestGateWithoutRedis: an instance started without --redis-url refuses to
// create a gated sale, and fails a gated sale's buyers closed.
func TestGateWithoutRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	rs := testredis.Start(t)
	dbURL := testdb.New(t)
	with := testserver.Start(t, dbURL, "--redis-url", rs.URL, "--no-workers")
	without := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	r := admin(t, c, http.MethodPost, without.URL+"/admin/sales", `{"sku":"sku_1","initialStock":5,"perCustomerLimit":1,"gate":"redis"}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), "--redis-url")
	sale := c.CreateSale(t, with.URL, `{"sku":"sku_1","initialStock":5,"perCustomerLimit":1,"gate":"redis"}`)
	r, err := c.Reserve(context.Background(), without.URL, sale, testserver.Token(t, "c1"), "k", 1)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	require.Equal(t, "sale_paused_fail_closed", errorCode(r.Body))
	r, err = c.Reserve(context.Background(), with.URL, sale, testserver.Token(t, "c1"), "k", 1)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = admin(t, c, http.MethodPost, with.URL+"/admin/sales", `{"sku":"sku_1","initialStock":5,"perCustomerLimit":1,"gate":"memcached"}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
}

// whileNotOpen sends again while the answer is 409 sale_not_open, for up to
// 3 s: right after a resume on one instance, another may still know the sale
// as paused until its sale cache hears of the change (milliseconds, at
// worst its once-a-second refresh).
func whileNotOpen(t *testing.T, send func() (testserver.Response, error)) testserver.Response {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		r, err := send()
		require.NoError(t, err)
		if r.Status != http.StatusConflict || errorCode(r.Body) != "sale_not_open" || time.Now().After(deadline) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			b.WriteString(line)
		}
	}
	return b.String()
}

type saleGate struct {
	State       string   `json:"state"`
	PauseReason string   `json:"pauseReason"`
	Gate        api.Gate `json:"gate"`
}

// waitGate polls the admin view of a gated sale until ok says so.
func waitGate(t *testing.T, c *testserver.Client, base, saleID string, ok func(saleGate) bool) saleGate {
	t.Helper()
	var v saleGate
	var body []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := admin(t, c, http.MethodGet, base+"/admin/sales/"+saleID)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		body = r.Body
		v = saleGate{}
		require.NoError(t, json.Unmarshal(r.Body, &v))
		if v.Gate.Kind == "redis" && v.Gate.OK != nil && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate of sale %s never got there: %s", saleID, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// admin sends an admin request, with a body when one is given.
func admin(t *testing.T, c *testserver.Client, method, url string, body ...string) testserver.Response {
	t.Helper()
	r, err := c.Do(context.Background(), method, url, testserver.AdminToken, strings.Join(body, ""))
	require.NoError(t, err)
	return r
}

func incidentKinds(t *testing.T, pool *pgxpool.Pool, saleID string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT kind FROM incidents WHERE sale_id = $1 ORDER BY incident_id`, saleID)
	require.NoError(t, err)
	var kinds []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kinds = append(kinds, k)
	}
	require.NoError(t, rows.Err())
	return kinds
}
