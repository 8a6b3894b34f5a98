package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// workerLine is the Worker's row of saleID's line in console_queues
// (edge/<its id>/<its run>, written by an origin from its reports), and its
// counts; "" when there is none yet.
func workerLine(t *testing.T, pool *pgxpool.Pool, saleID string) (string, flashline.QueueCounts) {
	t.Helper()
	var rows []string
	var counts flashline.QueueCounts
	r, err := pool.Query(context.Background(), `SELECT instance, counts FROM console_queues WHERE sale_id = $1 AND instance LIKE 'edge/worker-%'`, saleID)
	require.NoError(t, err)
	defer r.Close()
	for r.Next() {
		var row string
		var b []byte
		require.NoError(t, r.Scan(&row, &b))
		rows = append(rows, row)
		counts, err = flashline.DecodeQueueCounts(b)
		require.NoError(t, err, "the Worker's counts, as the origin wrote them")
	}
	require.NoError(t, r.Err())
	require.LessOrEqual(t, len(rows), 1, "one run of one Worker: %v", rows)
	if len(rows) == 0 {
		return "", flashline.QueueCounts{}
	}
	return rows[0], counts
}

// TestWorkerHoldersAndLines runs the Worker on workerd in front of a real
// origin and checks what its reports carry besides its totals, as the Go
// edge's (TestEdgesTicketsAndAdmissions, issues 48 and 50): the customers
// who took their pre-open tickets only through the Worker, more than one
// report carries, are written by the origin before the open and are in the
// crowd committed at the open, and `flashline sale verify-draw --url
// <worker> --customer` finds each checked one at the rank the room admits
// them by; the Worker's counts of the lines (arrivals, waiters seen, an
// admission's wait) are written as its own row of console_queues and reach
// the report after the sale.
func TestWorkerHoldersAndLines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve and workerd: not in -short")
	}
	workerdBinary(t)
	dbURL := testdb.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	origin := testserver.Start(t, dbURL, "--role", "origin")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the origin's logs:\n%s", origin.Logs())
		}
	})
	c := testserver.NewClient()
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)

	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sale := c.CreateSale(t, origin.URL, fmt.Sprintf(`{"sku":"sku_worker_holders","initialStock":10,"admission":"waiting_room",
		"fairness":"randomized_at_open","opensAt":%q}`, opensAt.Format(time.RFC3339)))
	// The origin's document names the sale before the Worker starts, so
	// that every ticket below is the Worker's (TestWorkerConformance).
	originDoc := func() roomtoken.Watermarks {
		var out struct{ Document string }
		r, err := c.Do(ctx, http.MethodGet, origin.URL+"/edge/watermarks", "", "")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(r.Body, &out))
		d, _, err := keys.OpenWatermarks(out.Document)
		require.NoError(t, err)
		return d
	}
	require.Eventually(t, func() bool { return len(originDoc().Sales) == 1 },
		settle, 100*time.Millisecond, "the origin's document names the sale")
	worker := startWorker(t, origin.URL)
	require.Eventually(t, func() bool {
		resp, err := http.Get(worker + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, settle, 100*time.Millisecond, "the Worker has the origin's document")

	// More customers than one report carries (roomtoken.MaxReportedHolders).
	const customers = roomtoken.MaxReportedHolders + 300
	ids := make([]string, customers)
	jwts := make([]string, customers)
	tokens := make([]string, customers)
	for i := range ids {
		ids[i] = fmt.Sprintf("worker-holder-%04d", i)
		if i%100 == 7 {
			ids[i] = fmt.Sprintf("wörker-hölder-%04d", i) // not ASCII
		}
		jwts[i] = testserver.Token(t, ids[i])
	}
	errs := make([]error, customers)
	began := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < customers; i += 8 {
				r, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/ticket", jwts[i], "")
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("%d: %s", r.Status, r.Body)
				}
				if err == nil {
					var v struct{ Token string }
					err = json.Unmarshal(r.Body, &v)
					tokens[i] = v.Token
				}
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	for i, tok := range tokens {
		require.NoError(t, errs[i], "customer %d's ticket", i)
		tk, err := keys.ParseTicket(tok)
		require.NoError(t, err)
		require.True(t, tk.PreOpen, "customer %d", i)
		require.Equal(t, tok, keys.SignTicket(tk), "the Worker's ticket, byte for byte")
	}

	// Before the open: the origin counts the Worker's tickets from its
	// reports and writes each holder (in batches), and no ticket itself.
	// Nothing asks the Worker meanwhile: its last tickets' request reports
	// them, and the holders, in as many reports as they take.
	var holders int64
	assert.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM waitroom_holders WHERE sale_id = $1`, sale).Scan(&holders))
		return holders == customers
	}, settle, 100*time.Millisecond)
	require.EqualValues(t, customers, holders, "the Worker's holders written before the open")
	t.Logf("%d pre-open tickets through the Worker in %s; their holders all written %s after the first",
		customers, took.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	require.Equal(t, int64(customers), originDoc().Sales[0].PreopenTickets, "the origin counts the Worker's tickets")
	var written int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_tickets FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&written))
	require.Zero(t, written, "a pre-open ticket through the Worker is written nowhere but as a holder")

	// The line's counts: every arrival through the Worker, and the waiters
	// it answered lately, in its own row.
	const polled = 5
	for i := range polled {
		require.Equal(t, "waiting", getStatus(t, c, worker, sale, jwts[i], tokens[i]).State)
	}
	// The counts go with the Worker's next pull, which a request starts
	// when due: /readyz is asked meanwhile.
	var row string
	var counts flashline.QueueCounts
	assert.Eventually(t, func() bool {
		if resp, err := http.Get(worker + "/readyz"); err == nil {
			resp.Body.Close()
		}
		row, counts = workerLine(t, pool, sale)
		return counts.Arrivals == customers && counts.Active >= polled
	}, settle, 100*time.Millisecond)
	require.EqualValues(t, customers, counts.Arrivals, "the Worker's arrivals in its row %q", row)
	require.GreaterOrEqual(t, counts.Active, int64(polled), "the waiters the Worker answered lately")
	require.Zero(t, counts.Returns, "a pre-open ticket's page began asking at the open, not at its ticket's arrival (the start of the hour): no return")
	require.Regexp(t, `^edge/worker-[0-9a-f]{8}/[0-9a-f]{8}$`, row)
	var minutes int64
	for _, n := range counts.Minutes {
		minutes += n
	}
	require.EqualValues(t, customers, minutes, "the arrivals by minute")

	// The open: the crowd committed holds every customer, who took their
	// tickets through the Worker alone, and verify-draw through the Worker
	// finds them at their rank by the final seed.
	r, err := c.To(origin.URL).OpenSale(ctx, testserver.AdminToken, sale)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var finalSeed []byte
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT final_seed FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&finalSeed))
		return finalSeed != nil
	}, settle, 50*time.Millisecond, "the crowd committed")
	var frozen int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_count FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&frozen))
	require.EqualValues(t, customers, frozen, "the crowd as frozen")
	tr, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/draw", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, tr.Status, "%s", tr.Body)
	var doc api.DrawTranscript
	require.NoError(t, json.Unmarshal(tr.Body, &doc))
	require.Equal(t, "drawn", doc.Status)
	require.EqualValues(t, customers, doc.RegistrantCount, "every holder of the Worker is committed")
	bin := testserver.Binary(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "FLASHLINE_URL=") {
			env = append(env, kv)
		}
	}
	for _, i := range []int{0, 7, customers / 2, customers - 1} {
		tk, err := keys.ParseTicket(tokens[i])
		require.NoError(t, err)
		cmd := exec.Command(bin, "sale", "verify-draw", sale, "--url", worker, "--customer", ids[i])
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		want := waitroom.RankIn(tk, "randomized_at_open", customers, 0, finalSeed)
		require.Contains(t, string(out), fmt.Sprintf("your rank   %d of %d\n", want, customers), "customer %s", ids[i])
	}

	// The committed crowd's polls are the Worker's, ranked by the final
	// seed as the origin ranks them: its answer is the origin's, and the
	// origin answers none of the Worker's (its status counter stands
	// still across one). Customers far back, whose rank by the final seed
	// is far from their ticket's own draw's, so that the two cannot agree
	// by chance.
	workerPulled(t, c, origin.URL, worker)
	statuses := func() float64 { return metricSum(t, c, origin.URL, "flashline_waitroom_status_total{") }
	checked := 0
	for i := 0; i < customers && checked < 5; i++ {
		tk, err := keys.ParseTicket(tokens[i])
		require.NoError(t, err)
		final, own := waitroom.RankIn(tk, "randomized_at_open", customers, 0, finalSeed), waitroom.Rank(tk, "randomized_at_open", customers)
		if final < 200 || final-own < 50 && own-final < 50 {
			continue
		}
		checked++
		var w, o status
		assert.Eventually(t, func() bool {
			before := statuses()
			w = getStatus(t, c, worker, sale, jwts[i], tokens[i])
			answered := statuses() == before
			o = getStatus(t, c, origin.URL, sale, jwts[i], tokens[i])
			return answered && w.State == "waiting" && w.Position == o.Position && w.PositionRange == o.PositionRange
		}, settle, 100*time.Millisecond)
		require.Equal(t, o, w, "customer %d's place by the final seed (rank %d, %d by the ticket's draw) on the Worker and the origin", i, final, own)
	}
	require.Equal(t, 5, checked)
	require.Positive(t, statuses(), "the origin counts the polls it answers")

	// An admission the Worker decides is counted in its row by its wait
	// (an open arrival_order room: the ticket is the origin's to place, the
	// polls the Worker's once its document names the room open).
	open := c.CreateSale(t, origin.URL, `{"sku":"sku_worker_line","initialStock":10,"admission":"waiting_room","fairness":"arrival_order"}`)
	r, err = c.To(origin.URL).OpenSale(ctx, testserver.AdminToken, open)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	workerPulled(t, c, origin.URL, worker)
	buyer := testserver.Token(t, "worker-line-buyer")
	held := ticket(t, c, worker, open, buyer)
	require.Eventually(t, func() bool { return getStatus(t, c, worker, open, buyer, held).State == "admitted" },
		settle, 100*time.Millisecond, "admitted through the Worker")
	assert.Eventually(t, func() bool {
		if resp, err := http.Get(worker + "/readyz"); err == nil {
			resp.Body.Close()
		}
		_, counts = workerLine(t, pool, open)
		return counts.Admitted() == 1
	}, settle, 100*time.Millisecond)
	require.EqualValues(t, 1, counts.Admitted(), "the Worker's admission in its counts: %+v", counts)
	rep, err := c.Do(ctx, http.MethodGet, origin.URL+"/admin/sales/"+sale+"/report", testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rep.Status, "%s", rep.Body)
	var report struct{ Queue api.QueueStats }
	require.NoError(t, json.Unmarshal(rep.Body, &report))
	require.EqualValues(t, customers, report.Queue.Arrivals, "the report's arrivals are the Worker's")
}

// metricSum is the sum of the values of base's metrics whose line starts
// with prefix.
func metricSum(t *testing.T, c *testserver.Client, base, prefix string) float64 {
	t.Helper()
	r, err := c.Do(context.Background(), http.MethodGet, base+"/metrics", testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status)
	sum := 0.0
	for _, line := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(line, prefix) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			sum += v
		}
	}
	return sum
}
