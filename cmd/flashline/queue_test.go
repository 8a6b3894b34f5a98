package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestQueueAnalyticsInTheReport: a sale sold through its waiting room on
// two instances (tickets taken on both, admitted on both, reserved on the
// other one); its report, from either instance, shows the line's times
// (p50, p90, p99) from both instances' counts added, the arrivals, the
// admitted and those who reserved. No instance wrote a row per arrival or
// poll: each wrote its own counts (console_queues), one row per sale.
func TestQueueAnalyticsInTheReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	servers := testserver.StartN(t, 2, dbURL)
	c := testserver.NewClient()
	const customers, stock = 16, 6
	// The pacer paces rooms with an opening time: the sale opens in a
	// second.
	opensAt := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	saleID := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"queue-1","initialStock":%d,"confirmation":"customer","admission":"waiting_room","fairness":"arrival_order","opensAt":%q}`, stock, opensAt))

	type waiter struct{ jwt, ticket string }
	all := make([]waiter, customers)
	for i := range all {
		all[i].jwt = testserver.Token(t, fmt.Sprintf("queue-%02d", i))
		r, err := c.To(servers[i%2].URL).Ticket(t.Context(), all[i].jwt, saleID, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		all[i].ticket = r.Value.Token
	}
	// Everyone polls, on the instance it did not take its ticket on, until
	// it is admitted (and reserves with its token on the first one) or told
	// the sale sold out.
	reserved := drainLine(t, customers, func(i int) (string, string) {
		r, err := c.To(servers[(i+1)%2].URL).Status(t.Context(), all[i].jwt, saleID, all[i].ticket, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return r.Value.State, r.Value.AdmissionToken
	}, func(i int, admission string) bool {
		res, err := c.To(servers[i%2].URL).Reserve(t.Context(), all[i].jwt, client.ReserveRequest{
			SaleID: saleID, Quantity: 1, IdempotencyKey: fmt.Sprintf("queue-%d", i), AdmissionToken: admission})
		require.NoError(t, err)
		return res.Status == http.StatusCreated
	})
	require.Equal(t, stock, reserved)

	// Each instance writes its counts within a second or so; the report
	// adds them.
	var q *api.QueueStats
	require.Eventually(t, func() bool {
		r, err := c.To(servers[1].URL).Report(t.Context(), testserver.AdminToken, saleID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		q = r.Value.Queue
		return q != nil && q.Instances == 2 && q.Arrivals == customers && q.Reserved == stock
	}, 30*time.Second, 200*time.Millisecond, "the report never added both instances' counts: %+v", q)
	require.GreaterOrEqual(t, q.Admitted, int64(stock))
	require.Equal(t, q.Admitted-q.Reserved, q.AdmittedNotReserved)
	require.NotNil(t, q.WaitP50)
	require.NotNil(t, q.WaitP90)
	require.NotNil(t, q.WaitP99)
	require.LessOrEqual(t, *q.WaitP50, *q.WaitP90)
	require.LessOrEqual(t, *q.WaitP90, *q.WaitP99)
	require.NotNil(t, q.ToReserveP50)
	require.LessOrEqual(t, *q.ToReserveP50, *q.ToReserveP99)
	require.NotEmpty(t, q.ArrivalsByMinute)
	var byMinute int64
	for _, m := range q.ArrivalsByMinute {
		byMinute += m.Count
	}
	require.EqualValues(t, customers, byMinute)

	// The live page adds the same counts.
	r, err := c.To(servers[0].URL).Live(t.Context(), testserver.AdminToken, saleID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.NotNil(t, r.Value.Queue)
	require.EqualValues(t, customers, r.Value.Queue.Arrivals)
}

// TestQueueAnalyticsThroughEdges: a sale whose crowd takes its tickets and
// polls on two edges (flashline serve --role edge) with two origins: the
// edges count their waiters as instances do and report their counts in
// their syncs; the origins write them, one row per edge (edge/id/run), and
// the report adds them to the origins' own (the reservations, made at an
// origin through the edges). Nothing is written per arrival or poll: the
// edges' rows are written at most once a second each, whichever origins
// heard the report.
func TestQueueAnalyticsThroughEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	origins := []*testserver.Server{testserver.Start(t, dbURL, "--role", "origin"), testserver.Start(t, dbURL, "--role", "origin")}
	originURLs := urls(origins)
	// The edges' own metrics (their counts of the line, and the tickets
	// they handed out themselves) on addresses of their own.
	edgeMetrics := []string{testserver.FreeAddr(t), testserver.FreeAddr(t)}
	edges := []*testserver.Server{
		testserver.StartEdge(t, originURLs, "--metrics-addr", edgeMetrics[0]),
		testserver.StartEdge(t, originURLs, "--metrics-addr", edgeMetrics[1]),
	}
	c := testserver.NewClient()
	const customers, stock = 16, 6
	opensAt := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	saleID := c.CreateSale(t, origins[0].URL, fmt.Sprintf(`{"sku":"queue-edges","initialStock":%d,"confirmation":"customer","admission":"waiting_room","fairness":"arrival_order","opensAt":%q}`, stock, opensAt))
	for _, e := range edges {
		require.Eventually(t, func() bool {
			r, err := c.Do(ctx, http.MethodGet, e.URL+"/sales/"+saleID+"/policy", "", "")
			return err == nil && r.Status == http.StatusOK
		}, 10*time.Second, 50*time.Millisecond, "edge %s hears of the room", e.URL)
	}

	type waiter struct{ jwt, ticket string }
	all := make([]waiter, customers)
	for i := range all {
		all[i].jwt = testserver.Token(t, fmt.Sprintf("queue-edge-%02d", i))
		all[i].ticket = getTicket(t, c, edges[i%2].URL, saleID, all[i].jwt)
	}
	// Everyone polls its edge until admitted (and reserves, through the
	// edge, at an origin) or told the sale sold out.
	reserved := drainLine(t, customers, func(i int) (string, string) {
		st := getStatus(t, c, edges[i%2].URL, saleID, all[i].jwt, all[i].ticket)
		return st.State, st.AdmissionToken
	}, func(i int, admission string) bool {
		res, err := c.Do(ctx, http.MethodPost, edges[i%2].URL+"/sales/"+saleID+"/reservations", all[i].jwt, `{"quantity":1}`,
			"Idempotency-Key", fmt.Sprintf("queue-edge-%d", i), "X-Admission-Token", admission)
		require.NoError(t, err)
		return res.Status == http.StatusCreated
	})
	require.Equal(t, stock, reserved)

	// The edges' counts reach the report within a sync or two: every
	// arrival and admission was an edge's.
	var q *api.QueueStats
	require.Eventually(t, func() bool {
		r, err := c.To(origins[1].URL).Report(ctx, testserver.AdminToken, saleID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		q = r.Value.Queue
		return q != nil && q.Arrivals == customers && q.Reserved == stock && q.Admitted >= stock
	}, 30*time.Second, 200*time.Millisecond, "the report never added the edges' counts: %+v", q)
	require.NotNil(t, q.WaitP50)
	require.NotNil(t, q.WaitP99)
	require.LessOrEqual(t, *q.WaitP50, *q.WaitP99)
	require.NotNil(t, q.ToReserveP50)
	var byMinute int64
	for _, m := range q.ArrivalsByMinute {
		byMinute += m.Count
	}
	require.EqualValues(t, customers, byMinute, "%+v", q)

	// One row per edge (whichever origins wrote it), beside the origins',
	// with what each edge counted itself: the tickets it handed out (an
	// edge passes on to an origin what it cannot answer yet, such as a
	// ticket before it heard of the room) and the admissions it answered.
	var edgeRows, edgeArrivals, edgeAdmitted int64
	var edgeTickets, edgeWaits float64
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), coalesce(sum((convert_from(counts, 'UTF8')::jsonb->>'arrivals')::bigint), 0),
			coalesce(sum((SELECT sum(x::bigint) FROM jsonb_array_elements_text(convert_from(counts, 'UTF8')::jsonb->'wait') x)), 0)
			FROM console_queues WHERE sale_id = $1 AND instance LIKE 'edge/%'`, saleID).Scan(&edgeRows, &edgeArrivals, &edgeAdmitted))
		edgeTickets, edgeWaits = 0, 0
		for _, m := range edgeMetrics {
			edgeTickets += metric(t, c, "http://"+m, `flashline_waitroom_tickets_total{kind="new"}`)
			edgeWaits += metric(t, c, "http://"+m, `flashline_waitroom_queue_wait_seconds_count{sale_id="`+saleID+`"}`)
		}
		return edgeRows == 2 && float64(edgeArrivals) == edgeTickets && float64(edgeAdmitted) == edgeWaits
	}, 30*time.Second, 200*time.Millisecond, "the edges' rows never said what the edges counted")
	require.Positive(t, edgeAdmitted, "the edges answered the polls and admitted")
	require.GreaterOrEqual(t, q.Instances, 3)

	// The live page, from either origin, adds the same counts.
	r, err := c.To(origins[0].URL).Live(ctx, testserver.AdminToken, saleID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.NotNil(t, r.Value.Queue)
	require.EqualValues(t, customers, r.Value.Queue.Arrivals)
}

// drainLine has each of n waiters poll (its state and admission token)
// until admitted, then reserve (whether a unit was reserved), or told the
// sale sold out, a round of polls every 100 ms; it returns the units
// reserved.
func drainLine(t *testing.T, n int, poll func(i int) (state, admission string), reserve func(i int, admission string) bool) int {
	t.Helper()
	reserved, decided := 0, make([]bool, n)
	deadline := time.Now().Add(90 * time.Second)
	for left := n; left > 0; {
		require.True(t, time.Now().Before(deadline), "the line never ended: %d undecided", left)
		for i := range n {
			if decided[i] {
				continue
			}
			switch state, admission := poll(i); state {
			case "admitted":
				if reserve(i, admission) {
					reserved++
				}
				decided[i], left = true, left-1
			case "sold_out":
				decided[i], left = true, left-1
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return reserved
}
