package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/webhook"
)

// The day after the click against real `flashline serve` processes and real
// PostgreSQL, through the HTTP contract (and the CLI, in process): payment
// events delivered at once to several instances, a failed payment racing the
// sweeper, voids racing refunds, an extension outliving the original time, a
// repair of a corrupted sale, and a rogue write from psql named by its
// incident. Run with -v for the figures.

// serveOnFreshDB is the setup of the tests that run n serve processes
// (flags theirs) on a database of their own: skipped in -short and run in
// parallel with the others; the database's URL, a pool on it, the servers
// and the client their requests go through.
func serveOnFreshDB(t *testing.T, n int, flags ...string) (string, *pgxpool.Pool, []*testserver.Server, *testserver.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	return dbURL, newPool(t, dbURL), testserver.StartN(t, n, dbURL, flags...), testserver.NewClient()
}

func newPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Since(start)
}

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

// holdsOf reserves one unit for each of n new customers, spread over the
// servers, and returns the reservation ids.
func holdsOf(t *testing.T, c *testserver.Client, servers []*testserver.Server, saleID, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		r, err := c.Reserve(context.Background(), servers[i%len(servers)].URL, saleID, testserver.Token(t, fmt.Sprintf("%s-%d", prefix, i)), "k", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		ids[i] = reservationID(t, r.Body)
	}
	return ids
}

// waitForSweeper waits until a sweep job has completed: River elects the
// leader that schedules it some seconds after the instances start.
func waitForSweeper(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	waitFor(t, 60*time.Second, "a sweep job completed", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM river_job WHERE kind = 'flashline_sweep' AND state = 'completed'`) > 0
	})
}

func paymentEvent(id, typ, reservationID, ref string) client.PaymentEvent {
	return client.PaymentEvent{ID: id, Type: typ, Data: client.PaymentData{ReservationID: reservationID, PaymentReference: ref}}
}

// requireEachRestockedOnce: every reservation of the sale that ended
// (expired, cancelled, voided) has exactly one ledger row returning its
// units, of its kind; the others none; the invariant holds.
func requireEachRestockedOnce(t *testing.T, pool *pgxpool.Pool, saleID string) map[string]int {
	t.Helper()
	states := map[string]int{}
	want := map[string]string{"expired": "expire", "cancelled": "cancel", "voided": "void"}
	rows, err := pool.Query(context.Background(), `
		SELECT r.state, r.quantity,
		       count(l.entry_id) FILTER (WHERE l.reason IN ('expire', 'cancel', 'void'))::int,
		       coalesce(sum(l.delta) FILTER (WHERE l.reason IN ('expire', 'cancel', 'void')), 0)::int,
		       coalesce(string_agg(l.reason, ',') FILTER (WHERE l.reason IN ('expire', 'cancel', 'void')), '')
		  FROM reservations r
		  LEFT JOIN stock_ledger l ON l.reservation_id = r.reservation_id
		 WHERE r.sale_id = $1
		 GROUP BY r.reservation_id`, saleID)
	require.NoError(t, err)
	var state, reasons string
	var qty, n, back int
	_, err = pgx.ForEachRow(rows, []any{&state, &qty, &n, &back, &reasons}, func() error {
		states[state]++
		if kind, ended := want[state]; ended {
			require.Equal(t, 1, n, "a %s reservation restocked %d times (%s)", state, n, reasons)
			require.Equal(t, kind, reasons)
			require.Equal(t, qty, back)
		} else {
			require.Zero(t, n, "a %s reservation restocked (%s)", state, reasons)
		}
		return nil
	})
	require.NoError(t, err)
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT ok FROM sale_invariant WHERE sale_id = $1`, saleID).Scan(&ok))
	require.True(t, ok, "sale_invariant")
	return states
}

// TestPaymentEventsAcrossInstances: a payment provider that delivers each
// event several times at once, to three instances: every hold is confirmed
// once (one order, one event row), the other deliveries are replays with the
// same order; a bad signature or a stale one is refused on a real instance.
func TestPaymentEventsAcrossInstances(t *testing.T) {
	_, pool, servers, c := serveOnFreshDB(t, 3, "--sweep-interval", "1s", "--invariant-interval", "1s")
	ctx := context.Background()
	const holds, copies = 40, 3 // each event: 3 deliveries to each of 3 instances
	saleID := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_pay3","initialStock":%d,"buckets":4}`, holds))
	ids := holdsOf(t, c, servers, saleID, "payer", holds)

	type answer struct {
		hold int
		res  client.PaymentResult
		err  string
	}
	answers := make(chan answer, holds*copies*len(servers))
	var wg sync.WaitGroup
	start := make(chan struct{})
	began := time.Now()
	for h, id := range ids {
		// One event, one set of bytes and one signature, as a provider's
		// retries send it.
		body, err := json.Marshal(paymentEvent(fmt.Sprintf("evt_%d", h), "payment.succeeded", id, fmt.Sprintf("pi_%d", h)))
		require.NoError(t, err)
		sig := webhook.Sign(time.Now(), body, testserver.PaymentSecret)
		for _, s := range servers {
			for range copies {
				wg.Go(func() {
					<-start
					r, err := c.To(s.URL).SendPaymentEventBody(ctx, sig, body)
					// A delivery the instance sheds (503, 429: too busy, on
					// a loaded machine) is sent again, as a provider does.
					for try := 0; err == nil && (r.Status == http.StatusServiceUnavailable || r.Status == http.StatusTooManyRequests) && try < 200; try++ {
						time.Sleep(time.Duration(20+rand.IntN(80)) * time.Millisecond)
						r, err = c.To(s.URL).SendPaymentEventBody(ctx, sig, body)
					}
					if err != nil || r.Status != http.StatusOK {
						answers <- answer{hold: h, err: fmt.Sprintf("%v %d %s", err, r.Status, r.Body)}
						return
					}
					answers <- answer{hold: h, res: r.Value}
				})
			}
		}
	}
	close(start)
	wg.Wait()
	took := time.Since(began)
	close(answers)
	firsts, replays := make([]int, holds), 0
	orders := make([]map[string]bool, holds)
	for a := range answers {
		require.Empty(t, a.err, "hold %d", a.hold)
		require.Equal(t, "confirmed", a.res.Outcome, "hold %d: %+v", a.hold, a.res)
		if orders[a.hold] == nil {
			orders[a.hold] = map[string]bool{}
		}
		orders[a.hold][a.res.OrderID] = true
		if a.res.Replayed {
			replays++
		} else {
			firsts[a.hold]++
		}
	}
	for h := range holds {
		require.Equal(t, 1, firsts[h], "hold %d applied once", h)
		require.Len(t, orders[h], 1, "hold %d: every answer names the same order", h)
	}
	require.Equal(t, holds, scalar[int](t, pool, `SELECT count(*) FROM orders o JOIN reservations r USING (reservation_id) WHERE r.sale_id = $1`, saleID))
	require.Equal(t, holds, scalar[int](t, pool, `SELECT count(*) FROM payment_events`))
	require.Equal(t, holds, scalar[int](t, pool, `SELECT count(*) FROM reservations WHERE sale_id = $1 AND state = 'confirmed'`, saleID))
	requireStock(t, pool, saleID, 0, holds)
	t.Logf("%d events x %d deliveries at once over 3 instances in %s: %d applied once each, %d replays, %d orders",
		holds, copies*len(servers), took.Round(time.Millisecond), holds, replays, holds)

	t.Run("RefusedOnARealInstance", func(t *testing.T) {
		before := scalar[int](t, pool, `SELECT count(*) FROM payment_events`)
		body, _ := json.Marshal(paymentEvent("evt_x", "payment.succeeded", ids[0], "pi_x"))
		for sig, code := range map[string]string{
			webhook.Sign(time.Now(), body, "the-wrong-secret-0123456789abcdefgh"):         "signature_invalid",
			webhook.Sign(time.Now().Add(-10*time.Minute), body, testserver.PaymentSecret): "signature_expired",
			"": "signature_invalid",
		} {
			r, err := c.To(servers[1].URL).SendPaymentEventBody(ctx, sig, body)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			require.Equal(t, code, r.Code())
		}
		require.Equal(t, before, scalar[int](t, pool, `SELECT count(*) FROM payment_events`))
	})
}

// TestFailedPaymentRacesSweeper: holds of 10 s on three instances sweeping
// every second; a payment.failed for every hold is sent around the moment
// they expire, so that failures and sweeps meet on the same rows. Every hold
// ends cancelled or expired, and its units come back exactly once.
func TestFailedPaymentRacesSweeper(t *testing.T) {
	_, pool, servers, c := serveOnFreshDB(t, 3, "--sweep-interval", "1s", "--invariant-interval", "1s")
	ctx := context.Background()
	const holds = 90
	waitForSweeper(t, pool)
	saleID := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_fail","initialStock":%d,"reservationTtlSeconds":10,"buckets":3}`, holds))
	ids := holdsOf(t, c, servers, saleID, "failer", holds)
	// Each hold's failure is sent at a point from 4 s before its own expiry
	// to 4 s after, spread over the holds: the sweeps around the expiries
	// meet those sent then; the first ones come seconds before any sweep
	// could, the last ones after several, so that both outcomes happen
	// however long a loaded machine took to make the holds.
	expiresAt := make([]time.Time, len(ids))
	for i, id := range ids {
		expiresAt[i] = scalar[time.Time](t, pool, `SELECT expires_at FROM reservations WHERE reservation_id = $1`, id)
	}
	outcomes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			time.Sleep(time.Until(expiresAt[i].Add(-4*time.Second + time.Duration(i)*8000*time.Millisecond/holds)))
			r, err := c.To(servers[i%3].URL).SendPaymentEvent(ctx, time.Now(), client.PaymentEvent{
				ID: fmt.Sprintf("evt_fail_%d", i), Type: "payment.failed", Data: client.PaymentData{ReservationID: id, Reason: "card declined"},
			}, testserver.PaymentSecret)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || r.Status != http.StatusOK {
				outcomes[fmt.Sprintf("error %v %d %s", err, r.Status, r.Body)]++
				return
			}
			outcomes[r.Value.Outcome]++
		})
	}
	wg.Wait()
	waitFor(t, 30*time.Second, "every hold ended", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM reservations WHERE sale_id = $1 AND state = 'pending'`, saleID) == 0
	})
	states := requireEachRestockedOnce(t, pool, saleID)
	require.Equal(t, holds, states["cancelled"]+states["expired"], "%v", states)
	require.Equal(t, states["cancelled"], outcomes["cancelled"], "a failure cancels what the sweeper has not expired: %v", outcomes)
	require.Equal(t, states["expired"], outcomes["no_effect"], "and nothing else: %v", outcomes)
	require.Equal(t, holds, outcomes["cancelled"]+outcomes["no_effect"], "every failure answered 200: %v", outcomes)
	requireStock(t, pool, saleID, holds, 0)
	require.Positive(t, states["cancelled"], "the race did not happen: no failure came first")
	require.Positive(t, states["expired"], "the race did not happen: the sweeper came first nowhere")
	// Who returned the units, by stock_audit: the sweeper as flashline-jobs,
	// the payment events (admin pool) as flashline-admin.
	rows, err := pool.Query(ctx, `SELECT DISTINCT application_name FROM stock_audit
		WHERE sale_id = $1 AND new_quantity > old_quantity ORDER BY 1`, saleID)
	require.NoError(t, err)
	writers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"flashline-admin", "flashline-jobs"}, writers)
	t.Logf("payment.failed racing the sweeper on 3 instances: %d holds, %d cancelled by the failure, %d expired by the sweeper first; each restocked once",
		holds, states["cancelled"], states["expired"])
}

// TestVoidAcrossInstances: each of ten paid orders is voided twice on each
// of three instances and refunded on each, all at once: each is voided once
// and its units come back once.
func TestVoidAcrossInstances(t *testing.T) {
	_, pool, servers, c := serveOnFreshDB(t, 3, "--invariant-interval", "1s")
	ctx := context.Background()
	const orders = 10
	saleID := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_void3","initialStock":%d,"buckets":2}`, orders+5))
	ids := holdsOf(t, c, servers, saleID, "voided", orders)
	for i, id := range ids {
		r, err := c.To(servers[0].URL).SendPaymentEvent(ctx, time.Now(), paymentEvent(fmt.Sprintf("evt_pay_%d", i), "payment.succeeded", id, fmt.Sprintf("pi_%d", i)), testserver.PaymentSecret)
		require.NoError(t, err)
		require.Equal(t, "confirmed", r.Value.Outcome, "%s", r.Body)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan string, orders*9)
	for i, id := range ids {
		for j, s := range servers {
			for k := range 2 {
				wg.Go(func() {
					<-start
					r, err := c.To(s.URL).Void(ctx, testserver.AdminToken, id, "automation pattern", fmt.Sprintf("ops-%d-%d", j, k))
					if err != nil || r.Status != http.StatusOK || r.Value.State != "voided" {
						errs <- fmt.Sprintf("void %s on %d: %v %d %s", id, j, err, r.Status, r.Body)
					}
				})
			}
			wg.Go(func() {
				<-start
				r, err := c.To(s.URL).SendPaymentEvent(ctx, time.Now(), paymentEvent(fmt.Sprintf("evt_refund_%d_%d", i, j), "refund.succeeded", id, fmt.Sprintf("pi_%d", i)), testserver.PaymentSecret)
				if err != nil || r.Status != http.StatusOK || (r.Value.Outcome != "voided" && r.Value.Outcome != "no_effect") {
					errs <- fmt.Sprintf("refund %s on %d: %v %d %s", id, j, err, r.Status, r.Body)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	states := requireEachRestockedOnce(t, pool, saleID)
	require.Equal(t, map[string]int{"voided": orders}, states)
	require.Equal(t, orders, scalar[int](t, pool, `SELECT count(*) FROM operator_actions WHERE action = 'void'`), "one audit row per void")
	requireStock(t, pool, saleID, orders+5, 0)
	t.Logf("%d orders, each voided 6 times and refunded 3 times at once on 3 instances: each voided once, units back once", orders)
}

// TestExtendThenPayAcrossSweeper: holds of 6 s extended by 20 s on an
// instance whose sweeper runs every second survive their original time and
// are confirmed by payment inside the new window; a hold made after the
// extension expires on time, and its payment is late.
func TestExtendThenPayAcrossSweeper(t *testing.T) {
	_, pool, servers, c := serveOnFreshDB(t, 1, "--sweep-interval", "1s", "--invariant-interval", "1s")
	api := c.To(servers[0].URL)
	ctx := context.Background()
	waitForSweeper(t, pool)
	// Six seconds, not two: making the five holds and extending them must
	// fit in a hold's time on a busy machine (with two, one hold had
	// expired before the extension came, seen in a fresh-clone run).
	const ttl = 6 * time.Second
	saleID := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_ext","initialStock":10,"reservationTtlSeconds":%d}`, int(ttl.Seconds())))
	ids := holdsOf(t, c, servers, saleID, "slow-payer", 5)
	r, err := api.ExtendSale(ctx, testserver.AdminToken, saleID, 20, "ops-ana")
	require.NoError(t, err)
	require.Equal(t, 5, r.Value.Extended, "%s", r.Body)
	late := holdsOf(t, c, servers, saleID, "after-extension", 1)[0]
	lateMade := time.Now()

	// Past the holds' original time (the late one's too) by three sweeps.
	time.Sleep(time.Until(lateMade.Add(ttl + 1500*time.Millisecond)))
	require.Equal(t, 5, scalar[int](t, pool, `SELECT count(*) FROM reservations WHERE sale_id = $1 AND state = 'pending'`, saleID))
	for i, id := range ids {
		p, err := api.SendPaymentEvent(ctx, time.Now(), paymentEvent(fmt.Sprintf("evt_%d", i), "payment.succeeded", id, fmt.Sprintf("pi_%d", i)), testserver.PaymentSecret)
		require.NoError(t, err)
		require.Equal(t, "confirmed", p.Value.Outcome, "%s", p.Body)
	}
	p, err := api.SendPaymentEvent(ctx, time.Now(), paymentEvent("evt_late", "payment.succeeded", late, "pi_late"), testserver.PaymentSecret)
	require.NoError(t, err)
	require.Equal(t, "late_payment", p.Value.Outcome, "%s", p.Body)
	waitFor(t, 10*time.Second, "the late hold swept", func() bool {
		return scalar[string](t, pool, `SELECT state FROM reservations WHERE reservation_id = $1`, late) == "expired"
	})
	requireEachRestockedOnce(t, pool, saleID)
	requireStock(t, pool, saleID, 5, 5)
	lp, err := api.LatePayments(ctx, testserver.AdminToken, false)
	require.NoError(t, err)
	require.Len(t, lp.Value.LatePayments, 1)
	require.Equal(t, "hold_expired", lp.Value.LatePayments[0].Reason)
	require.Equal(t, 1.0, metric(t, c, servers[0].URL, "flashline_late_payments_total"))
}

// psqlBinary is psql: on PATH, or beside the server binaries.
func psqlBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "psql"); p != "" {
			if _, err := exec.LookPath(p); err == nil {
				return p
			}
		}
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql"); len(m) > 0 {
		return m[len(m)-1]
	}
	t.Fatal("psql not found (PATH, pg_config --bindir, /usr/lib/postgresql/*/bin): it comes with PostgreSQL's client, which the development database needs too")
	return ""
}

// psql runs one statement with the real psql, as a person at a terminal
// would.
func psql(t *testing.T, dbURL, sql string) {
	t.Helper()
	out, err := exec.Command(psqlBinary(t), dbURL, "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	require.NoError(t, err, "psql: %s", out)
}

// TestRogueWriteNamedByIncident: an UPDATE of the stock table from psql
// behind the service's back pauses the sale; `flashline incident show`
// names psql and the database user as the writer, shows the audit rows
// around it (the service's own changes as flashline-sale), and lists the
// reservations made after it, not those before.
func TestRogueWriteNamedByIncident(t *testing.T) {
	dbURL, pool, servers, c := serveOnFreshDB(t, 2, "--sweep-interval", "1s", "--invariant-interval", "1s")
	ctx := context.Background()
	saleID := c.CreateSale(t, servers[0].URL, `{"sku":"sku_rogue","initialStock":100,"buckets":2}`)
	before := holdsOf(t, c, servers, saleID, "before", 4)

	psql(t, dbURL, fmt.Sprintf(`UPDATE stock SET quantity = quantity + 5 WHERE sale_id = '%s' AND bucket = 1`, saleID))
	// Buyers keep buying until the invariant job pauses the sale (or a few
	// have bought).
	var after []string
	for i := range 8 {
		r, err := c.Reserve(ctx, servers[i%2].URL, saleID, testserver.Token(t, fmt.Sprintf("after-%d", i)), "k", 1)
		require.NoError(t, err)
		if r.Status != http.StatusCreated {
			require.Equal(t, "sale_not_open", errorCode(r.Body), "%s", r.Body)
			break
		}
		after = append(after, reservationID(t, r.Body))
		time.Sleep(100 * time.Millisecond)
	}
	require.NotEmpty(t, after, "no reservation between the rogue write and the pause")
	took := waitFor(t, 20*time.Second, "sale paused by the invariant job", func() bool {
		return scalar[string](t, pool, `SELECT state FROM sales WHERE sale_id = $1`, saleID) == "paused"
	})
	t.Logf("rogue write to pause: under %s after the %d reservations made since", took.Round(10*time.Millisecond), len(after))
	id := scalar[int64](t, pool, `SELECT incident_id FROM incidents WHERE sale_id = $1`, saleID)
	user := scalar[string](t, pool, `SELECT session_user::text`)

	out, _, err := runCLI(t, dbURL, "incident", "show", fmt.Sprint(id))
	require.NoError(t, err)
	t.Logf("flashline incident show %d:\n%s", id, out)
	require.Contains(t, out, fmt.Sprintf(`application_name "psql", database user %q`, user))
	require.Contains(t, out, "UPDATE stock SET quantity = quantity + 5")
	require.Regexp(t, `First change with no ledger row: audit \d+ at .*, bucket 1, \d+ -> \d+ \(\+5\)`, out)
	require.Regexp(t, `(?m)^!\s+\d+ .*psql`, out, "the rogue row is marked")
	require.Regexp(t, `(?m)^\s+\d+ .*flashline-sale`, out, "the service's own changes name it")
	require.Contains(t, out, fmt.Sprintf("Reservations made since the first bad change: %d", len(after)))
	for _, r := range after {
		require.Contains(t, out, r)
	}
	for _, r := range before {
		require.NotContains(t, out, r)
	}

	list, _, err := runCLI(t, dbURL, "incident", "list", saleID)
	require.NoError(t, err)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+%s\s+invariant_mismatch`, id, saleID), list)
	_, _, err = runCLI(t, dbURL, "incident", "show", "nope")
	require.ErrorContains(t, err, "not an incident id")
	_, _, err = runCLI(t, dbURL, "incident", "show", "999999")
	require.ErrorContains(t, err, "not found")
}

// TestRepairCorruptedSale: a sale whose stock was changed from psql is
// paused by the invariant job; `flashline sale repair` shows what the stock
// rows, the reservations and the ledger each say, writes nothing without
// --apply, and with it writes the correction ('repair' ledger rows naming
// the operator, one transaction) without resuming the sale; the invariant
// then holds and an admin resumes it.
func TestRepairCorruptedSale(t *testing.T) {
	dbURL, pool, servers, c := serveOnFreshDB(t, 1, "--invariant-interval", "1s")
	api := c.To(servers[0].URL)
	ctx := context.Background()
	saleID := c.CreateSale(t, servers[0].URL, `{"sku":"sku_repair","initialStock":30,"buckets":3,"confirmation":"customer"}`)
	ids := holdsOf(t, c, servers, saleID, "buyer", 6)
	for _, id := range ids[:3] {
		_, err := api.Confirm(ctx, testserver.AdminToken, id)
		require.NoError(t, err)
	}
	v, err := api.Void(ctx, testserver.AdminToken, ids[0], "automation pattern", "")
	require.NoError(t, err)
	require.Equal(t, "voided", string(v.Value.State))

	out, _, err := runCLI(t, dbURL, "sale", "repair", saleID)
	require.ErrorContains(t, err, "not paused", "an open sale is not repaired")
	require.Empty(t, out)

	psql(t, dbURL, fmt.Sprintf(`UPDATE stock SET quantity = quantity + 5 WHERE sale_id = '%s' AND bucket = 1`, saleID))
	waitFor(t, 10*time.Second, "sale paused by the invariant job", func() bool {
		s, err := api.Sale(ctx, testserver.AdminToken, saleID)
		require.NoError(t, err)
		return s.Value.State == "paused"
	})
	ledgerBefore := scalar[int](t, pool, `SELECT count(*) FROM stock_ledger WHERE sale_id = $1`, saleID)

	out, _, err = runCLI(t, dbURL, "sale", "repair", saleID)
	require.NoError(t, err)
	t.Logf("flashline sale repair:\n%s", out)
	require.Regexp(t, `(?m)^\s+1\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+\+5\s+-5\s*$`, out, "bucket 1: 5 unrecorded, corrected by -5")
	require.Regexp(t, `(?m)^\s+total\s+30\s+25\s+30\s+5\s+25\s+\+5\s+-5\s*$`, out)
	require.Contains(t, out, "Nothing written")
	require.Equal(t, ledgerBefore, scalar[int](t, pool, `SELECT count(*) FROM stock_ledger WHERE sale_id = $1`, saleID))

	r, err := api.ResumeSale(ctx, testserver.AdminToken, saleID)
	require.NoError(t, err)
	require.Equal(t, "invariant_broken", r.Code(), "%s", r.Body)

	env := map[string]string{"DATABASE_URL": dbURL, "USER": "ops-ana"}
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, []string{"sale", "repair", "--apply", saleID}, func(k string) string { return env[k] }, &stdout, &stderr))
	repaired := time.Now()
	t.Logf("flashline sale repair --apply:\n%s", stdout.String())
	require.Contains(t, stdout.String(), "Applied by ops-ana")
	rows, err := pool.Query(ctx, `SELECT bucket, delta, operator, xact_id IS NULL FROM stock_ledger WHERE sale_id = $1 AND reason = 'repair' ORDER BY entry_id`, saleID)
	require.NoError(t, err)
	type repairRow struct {
		Bucket, Delta int
		Operator      string
		Recorded      bool // records an earlier change (no xact of its own)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[repairRow])
	require.NoError(t, err)
	require.Equal(t, []repairRow{{1, 5, "ops-ana", true}, {1, -5, "ops-ana", false}}, got)
	require.Equal(t, "flashline-repair", scalar[string](t, pool,
		`SELECT application_name FROM stock_audit WHERE sale_id = $1 ORDER BY audit_id DESC LIMIT 1`, saleID), "the repair names itself")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM operator_actions WHERE action = 'repair' AND operator = 'ops-ana'`))

	// It stays paused, and the invariant job's first check after the repair
	// finds it holds. (The test slept 1.5 s, one interval and a half, and
	// read the last check: beside two CPU burners that was still the one
	// from before the repair.)
	require.Eventually(t, func() bool {
		s, err := api.Sale(ctx, testserver.AdminToken, saleID)
		require.NoError(t, err)
		require.Equal(t, "paused", s.Value.State, "repair never resumes")
		inv := s.Value.Invariant
		if inv.CheckedAt == nil {
			return false
		}
		at, err := time.Parse(time.RFC3339Nano, *inv.CheckedAt)
		require.NoError(t, err)
		if !at.After(repaired) {
			return false
		}
		require.True(t, inv.OK, "the first check after the repair: %+v", inv)
		return true
	}, 60*time.Second, 100*time.Millisecond, "no invariant check after the repair")
	check, _, err := runCLI(t, dbURL, "check")
	require.NoError(t, err, "%s", check)
	out, _, err = runCLI(t, dbURL, "sale", "repair", saleID)
	require.NoError(t, err)
	require.Contains(t, out, "Nothing to repair")

	r, err = api.ResumeSale(ctx, testserver.AdminToken, saleID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	requireEachRestockedOnce(t, pool, saleID)
	requireStock(t, pool, saleID, 25, 5)
}

// TestPayCommand: `flashline pay` signs and sends events as a provider
// would; by default the same payment reference for the same reservation,
// so paying twice is harmless and the refund names the order's payment.
func TestPayCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flashline serve process: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	saleID := c.CreateSale(t, srv.URL, `{"sku":"sku_cli_pay","initialStock":3}`)
	id := holdsOf(t, c, []*testserver.Server{srv}, saleID, "cli", 1)[0]
	pay := func(args ...string) (map[string]any, error) {
		env := map[string]string{"FLASHLINE_URL": srv.URL, "FLASHLINE_PAYMENT_WEBHOOK_SECRET": testserver.PaymentSecret}
		var stdout bytes.Buffer
		err := run(context.Background(), append([]string{"pay", "--reservation", id}, args...), func(k string) string { return env[k] }, &stdout, io.Discard)
		var v map[string]any
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &v), "%s", stdout.String())
		return v, err
	}
	v, err := pay("--amount", "12900", "--currency", "EUR")
	require.NoError(t, err)
	require.Equal(t, "confirmed", v["outcome"])
	v, err = pay()
	require.NoError(t, err)
	require.Equal(t, "already_confirmed", v["outcome"], "the same payment again")
	v, err = pay("--type", "refund.succeeded")
	require.NoError(t, err)
	require.Equal(t, "voided", v["outcome"])
	_, err = pay("--type", "payment.refunded")
	require.ErrorContains(t, err, "400 invalid_request")

	err = run(context.Background(), []string{"pay", "--reservation", id}, func(string) string { return "" }, io.Discard, io.Discard)
	require.ErrorContains(t, err, "FLASHLINE_PAYMENT_WEBHOOK_SECRET")
}

// TestServeRefusesPaymentAndRetentionSettings: a short payment secret, one
// shared with another secret, and a key retention under a day (0 or
// negative would prune every key at once) are refused before anything
// starts.
func TestServeRefusesPaymentAndRetentionSettings(t *testing.T) {
	t.Parallel()
	strong := strings.Repeat("s", 32)
	base := map[string]string{
		"DATABASE_URL": "postgres://127.0.0.1:1/none", "FLASHLINE_ADMIN_TOKEN": strong + "a",
		"FLASHLINE_JWT_SECRET": strong + "j", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong + "w",
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"ShortPaymentSecret", map[string]string{"FLASHLINE_PAYMENT_WEBHOOK_SECRET": "whsec"}, nil, "FLASHLINE_PAYMENT_WEBHOOK_SECRET is 5 bytes"},
		{"PaymentSecretIsTheJWTSecret", map[string]string{"FLASHLINE_PAYMENT_WEBHOOK_SECRET": strong + "j"}, nil, "a secret of its own"},
		{"PaymentSecretIsAWaitingRoomKey", map[string]string{"FLASHLINE_PAYMENT_WEBHOOK_SECRET": strong + "w"}, nil, "a secret of its own"},
		{"ZeroKeyRetention", nil, []string{"--key-retention", "0s"}, "--key-retention is 0s; it must be at least 24h0m0s"},
		{"NegativeKeyRetention", nil, []string{"--key-retention", "-1h"}, "--key-retention is -1h0m0s"},
		{"ShortKeyRetention", map[string]string{"FLASHLINE_KEY_RETENTION": "1h"}, nil, "--key-retention is 1h0m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			err := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...), func(k string) string { return env[k] }, io.Discard, io.Discard)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestDemoPrintsThePaymentFlow: `serve --demo` without a payment secret
// makes its demo sale confirmed by payment and prints how `flashline pay`
// pays for a hold, with the development secret it derived.
func TestDemoPrintsThePaymentFlow(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	cfg := serveConfig{adminToken: "dev-admin-token", jwtSecret: "dev-jwt-secret", demo: true}
	var out bytes.Buffer
	secret := webhook.DevSecret(cfg.jwtSecret)
	require.NoError(t, printDemo(context.Background(), store, cfg, secret, "http://localhost:8080", &out))
	require.Contains(t, out.String(), "FLASHLINE_PAYMENT_WEBHOOK_SECRET='"+secret+`' "$FLASHLINE" pay --url "$BASE" --reservation "${RESERVATION:?no reservation: see step 2}"`)
	m := regexp.MustCompile(`demo sale of 200 units: (sale_\w+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, "%s", out.String())
	sale, err := store.Sale(context.Background(), m[1])
	require.NoError(t, err)
	require.Equal(t, flashline.ConfirmByPayment, sale.Confirmation)

	cfg.paymentSecret = strings.Repeat("p", 40)
	out.Reset()
	require.NoError(t, printDemo(context.Background(), store, cfg, cfg.paymentSecret, "http://localhost:8080", &out))
	require.NotContains(t, out.String(), cfg.paymentSecret, "a configured secret is not printed")
	require.Contains(t, out.String(), `FLASHLINE_PAYMENT_WEBHOOK_SECRET="$FLASHLINE_PAYMENT_WEBHOOK_SECRET"`)
}

// TestPayNamesWhatIsMissing: `flashline pay` says which of the reservation
// and the secret it lacks (an empty --reservation, as a failed step before it
// leaves, is not a missing secret), before it sends anything.
func TestPayNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "FLASHLINE_PAYMENT_WEBHOOK_SECRET" {
			return strings.Repeat("s", 32)
		}
		return ""
	}
	none := func(string) string { return "" }
	err := run(context.Background(), []string{"pay", "--url", "http://127.0.0.1:1", "--reservation", ""}, env, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--reservation is missing")
	require.NotContains(t, err.Error(), "secret")
	err = run(context.Background(), []string{"pay", "--url", "http://127.0.0.1:1", "--reservation", "res_01M97PZR08HV7MVW8YCAJ4T6G7"}, none, io.Discard, io.Discard)
	require.ErrorContains(t, err, "secret is missing")
	require.NotContains(t, err.Error(), "--reservation")
	err = run(context.Background(), []string{"pay", "--url", "http://127.0.0.1:1"}, none, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--reservation and the payment webhook secret")
}

// TestServeSaysWhereToMoveWhenThePortIsTaken: a second `make run` on a port
// in use says how to choose another address, not only "bind: address
// already in use".
func TestServeSaysWhereToMoveWhenThePortIsTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	strong := strings.Repeat("s", 32)
	env := map[string]string{
		"DATABASE_URL": testdb.New(t), "FLASHLINE_ADMIN_TOKEN": strong + "a",
		"FLASHLINE_JWT_SECRET": strong + "j", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong + "w",
	}
	err = run(context.Background(), []string{"serve", "--addr", taken.Addr().String(), "--no-workers"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	require.ErrorContains(t, err, "address already in use")
	require.ErrorContains(t, err, "FLASHLINE_ADDR")
}
