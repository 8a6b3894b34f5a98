package worker

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// workerdBinary is workerd as `make workerd` installs it (npm, the version
// package.json pins), or FLASHLINE_WORKERD. Without it a test is skipped,
// and fails under CI=true: CI must prove the Worker.
func workerdBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FLASHLINE_WORKERD")
	if bin == "" {
		bin = filepath.Join("node_modules", ".bin", "workerd")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := "worker: no workerd (run `make workerd`, which installs it from npm into waitroom/worker/node_modules)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	abs, err := filepath.Abs(bin)
	require.NoError(t, err)
	return abs
}

// startWorker runs the Worker on workerd at a free loopback address in
// front of origins, and waits until it answers; it is stopped when the test
// ends.
func startWorker(t *testing.T, origins ...string) string {
	t.Helper()
	return serveStaged(t, ".", origins...)
}

// settle bounds each wait for the origin's document to reach the Worker (or
// an answer to follow from it). The origin publishes no sale while its own
// knowledge is stale, which on a machine the suite saturates lasted more
// than the 10 s these waits once had (run11: "the origin counts the
// Worker's 40 tickets: []"); a wait ends as soon as its condition holds.
const settle = 60 * time.Second

// workerPulled waits until the Worker holds a document the origin made
// after the call: two of its pulls answered by the origin since (an
// isolate's pulls follow one another, so the first one's document is taken
// by the time the second is answered). The Worker pulls when a request
// finds it due (every second while no room is open or about to open), so
// its /readyz is asked meanwhile. Until then, a sale the origin has just
// created or opened is not the Worker's: its polls are passed on, and the
// origin answers them.
func workerPulled(t *testing.T, c *testserver.Client, origin, worker string) {
	t.Helper()
	syncs := func() int {
		r, err := c.Do(context.Background(), http.MethodGet, origin+"/metrics", testserver.AdminToken, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
		n := 0
		for _, line := range strings.Split(string(r.Body), "\n") {
			if strings.HasPrefix(line, "flashline_http_requests_total{") && strings.Contains(line, `route="/edge/sync"`) {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				require.NoError(t, err, line)
				n += int(v)
			}
		}
		return n
	}
	from := syncs()
	require.Eventually(t, func() bool {
		if resp, err := http.Get(worker + "/readyz"); err == nil {
			resp.Body.Close()
		}
		return syncs() >= from+2
	}, settle, 100*time.Millisecond, "the Worker pulls the origin's document")
}

// wrongSolution is the smallest decimal that does not solve the challenge.
func wrongSolution(nonce string, bits int) string {
	for n := 0; ; n++ {
		s := strconv.Itoa(n)
		if roomtoken.LeadingZeroBits(sha256.Sum256([]byte(nonce+":"+s))) < bits {
			return s
		}
	}
}

type status struct {
	State          string
	Position       int64
	PositionRange  struct{ P25, P75 int64 }
	AdmissionToken string
	ExpiresIn      int64
	Stale          bool
	QueueIsFull    *bool
	Challenge      struct {
		Nonce string
		Bits  int
	}
	Variants []variant
}

// variant is one of a status answer's variants.
type variant struct{ SKU, Title, Availability string }

func getStatus(t *testing.T, c *testserver.Client, base, sale, jwt, ticket string) status {
	t.Helper()
	r, err := c.Do(context.Background(), http.MethodGet, base+"/sales/"+sale+"/status?token="+ticket, jwt, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var st status
	require.NoError(t, json.Unmarshal(r.Body, &st))
	return st
}

// ticket takes a ticket at base, retried until it is given (the Worker
// hears of a new room within a pull).
func ticket(t *testing.T, c *testserver.Client, base, sale, jwt string) string {
	t.Helper()
	var token string
	require.Eventually(t, func() bool {
		r, err := c.Do(context.Background(), http.MethodGet, base+"/sales/"+sale+"/ticket", jwt, "")
		if err != nil || r.Status != http.StatusOK {
			return false
		}
		var v struct{ Token string }
		require.NoError(t, json.Unmarshal(r.Body, &v))
		token = v.Token
		return true
	}, settle, 100*time.Millisecond, "a ticket of %s at %s", sale, base)
	return token
}

// TestWorkerConformance runs the Worker on workerd in front of a real
// origin and checks what the Go edge's tests check (cmd/flashline's
// TestEdgeWithoutDatabase, TestEdgesTicketsAndAdmissions,
// TestEdgeLosesItsOrigin): pre-open tickets signed by the Worker, in the
// origin's format, counted by the origin from the Worker's reports and not
// written per arrival; places that agree with the origin's; admission from
// the watermark, bought once; everything else passed on; and, the origin
// stopped, status answered stale and nobody admitted (fail closed), new
// tickets refused but those placed by the draw alone, until the origin is
// back.
func TestWorkerConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve and workerd: not in -short")
	}
	workerdBinary(t)
	dbURL := testdb.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addr := testserver.FreeAddr(t)
	origin := testserver.Start(t, dbURL, "--role", "origin", "--addr", addr)
	c := testserver.NewClient()
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)

	// Pre-open tickets of a randomized_at_open room: signed by the Worker.
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sale := c.CreateSale(t, origin.URL, fmt.Sprintf(`{"sku":"sku_worker","initialStock":10,"admission":"waiting_room",
		"fairness":"randomized_at_open","opensAt":%q}`, opensAt.Format(time.RFC3339)))
	// The Worker decides a sale's tickets once its document names the sale;
	// before that it passes them on and the origin signs them (which, on a
	// busy machine, this test once saw). So the origin's document names the
	// sale first, and the Worker starts after and is ready (a document
	// pulled since).
	// originDoc is the origin's watermarks document, opened.
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
	}, 30*time.Second, 100*time.Millisecond, "the Worker has the origin's document")
	const customers = 40
	jwts := make([]string, customers)
	tokens := make([]string, customers)
	for i := range jwts {
		id := fmt.Sprintf("worker-%03d", i)
		if i%10 == 3 {
			id = fmt.Sprintf("wörker-%03d-ü", i) // not ASCII: JSON writes it as it is, in both
		}
		jwts[i] = testserver.Token(t, id)
		tokens[i] = ticket(t, c, worker, sale, jwts[i])
		tk, err := keys.ParseTicket(tokens[i])
		require.NoError(t, err, "the origin's keys read the Worker's ticket")
		require.True(t, tk.PreOpen)
		require.Equal(t, tokens[i], keys.SignTicket(tk), "the ticket is the one the Go edge signs, byte for byte")
	}
	again := ticket(t, c, worker, sale, jwts[0])
	require.Equal(t, tokens[0], again, "asking again gives the same ticket")

	// The origin counts the Worker's tickets from its reports, exactly,
	// and writes none of them before the open.
	var doc roomtoken.Watermarks
	require.Eventually(t, func() bool {
		doc = originDoc()
		return len(doc.Sales) == 1 && doc.Sales[0].PreopenTickets == customers
	}, settle, 100*time.Millisecond, "the origin counts the Worker's %d tickets: %+v", customers, doc.Sales)
	var written int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_tickets FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&written))
	require.Zero(t, written, "a pre-open ticket through the Worker is written nowhere")

	// Places agree with the origin's, once the Worker has heard the count.
	for i := 0; i < customers; i += 7 {
		tk, err := keys.ParseTicket(tokens[i])
		require.NoError(t, err)
		want := waitroom.Rank(tk, "randomized_at_open", customers)
		require.Eventually(t, func() bool { return getStatus(t, c, worker, sale, jwts[i], tokens[i]).Position == want },
			settle, 100*time.Millisecond, "customer %d's place on the Worker", i)
		st := getStatus(t, c, worker, sale, jwts[i], tokens[i])
		require.Equal(t, "waiting", st.State)
		require.LessOrEqual(t, st.PositionRange.P25, st.Position)
		require.GreaterOrEqual(t, st.PositionRange.P75, st.Position)
		require.Equal(t, want, getStatus(t, c, origin.URL, sale, jwts[i], tokens[i]).Position)
	}
	// Someone else's ticket: admission_invalid, as the routes answer.
	r, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/status?token="+tokens[1], jwts[0], "")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), "admission_invalid")

	// Passed on: the page, the policy, a direct sale's ticket (the
	// origin's 409), a reservation; not served: the admin's routes.
	page, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/wait", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, string(page.Body), "<html")
	pol, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/policy", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pol.Status, "%s", pol.Body)
	direct := c.CreateSale(t, origin.URL, `{"sku":"sku_worker_direct","initialStock":10}`)
	r, err = c.Do(ctx, http.MethodGet, worker+"/sales/"+direct+"/ticket", jwts[0], "")
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	r, err = c.Reserve(ctx, worker, direct, jwts[0], "worker-direct-1", 1)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	for _, path := range []string{"/admin/sales/" + sale, "/metrics", "/edge/watermarks"} {
		r, err := c.Do(ctx, http.MethodGet, worker+path, testserver.AdminToken, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, r.Status, path)
	}

	// An open arrival_order room: admitted by the Worker from the
	// watermark; the admission buys once at the origin, through the Worker.
	open := c.CreateSale(t, origin.URL, `{"sku":"sku_worker_open","initialStock":10,"admission":"waiting_room","fairness":"arrival_order",
		"challengeBits":6}`)
	res, err := c.To(origin.URL).OpenSale(ctx, testserver.AdminToken, open)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	// The Worker holds a document that says the room is open: what
	// follows is its answer, not the origin's passed on (which, on a quiet
	// machine, all of it once was, within the Worker's second between pulls;
	// the origin stopped, the Worker then knew no such room and passed the
	// polls on to nobody: 503).
	workerPulled(t, c, origin.URL, worker)
	buyer := testserver.Token(t, "worker-buyer")
	held := ticket(t, c, worker, open, buyer)
	tk, err := keys.ParseTicket(held)
	require.NoError(t, err)
	var st status
	require.Eventually(t, func() bool {
		st = getStatus(t, c, worker, open, buyer, held)
		return st.State == "challenge_required"
	}, settle, 100*time.Millisecond, "the challenge asked by the Worker: %+v", st)
	require.Equal(t, keys.ChallengeNonce(tk), st.Challenge.Nonce, "the origin's nonce")
	require.Equal(t, 6, st.Challenge.Bits)
	solution := roomtoken.Solve(st.Challenge.Nonce, st.Challenge.Bits)
	require.Equal(t, "challenge_required", getStatus(t, c, worker, open, buyer, held+"&solution="+wrongSolution(st.Challenge.Nonce, 6)).State,
		"a wrong solution")
	st = getStatus(t, c, worker, open, buyer, held+"&solution="+solution)
	require.Equal(t, "admitted", st.State, "%+v", st)
	require.EqualValues(t, 120, st.ExpiresIn)
	a, err := keys.ParseAdmission(st.AdmissionToken)
	require.NoError(t, err)
	require.Equal(t, roomtoken.AdmissionID(tk), a.ID, "the admission id is the ticket's")
	r, err = c.Do(ctx, http.MethodPost, worker+"/sales/"+open+"/reservations", buyer, `{"quantity":1}`,
		"Idempotency-Key", "worker-buy-1", "X-Admission-Token", st.AdmissionToken)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r, err = c.Do(ctx, http.MethodPost, worker+"/sales/"+open+"/reservations", buyer, `{"quantity":1}`,
		"Idempotency-Key", "worker-buy-2", "X-Admission-Token", st.AdmissionToken)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), "admission_invalid")
	other := testserver.Token(t, "worker-other")
	otherTicket := ticket(t, c, worker, open, other)
	otherTk, err := keys.ParseTicket(otherTicket)
	require.NoError(t, err)
	otherTicket += "&solution=" + roomtoken.Solve(keys.ChallengeNonce(otherTk), 6)
	require.Eventually(t, func() bool { return getStatus(t, c, worker, open, other, otherTicket).State == "admitted" },
		settle, 100*time.Millisecond, "the second ticket admitted")

	// The origin stops: stale, and nobody admitted (fail closed). The
	// Worker answers stale for its document's life, then forgets the sale
	// and passes its requests on; an origin's stop can take longer than
	// that on a busy machine, so the polls start with the stop, not after it.
	stopped := make(chan error, 1)
	go func() { stopped <- origin.Stop(t) }()
	require.Eventually(t, func() bool {
		st = getStatus(t, c, worker, open, other, otherTicket)
		return st.Stale
	}, settle, 100*time.Millisecond, "stale once the origin is gone")
	require.Equal(t, "waiting", st.State)
	require.Empty(t, st.AdmissionToken)
	r, err = c.Do(ctx, http.MethodGet, worker+"/sales/"+open+"/ticket", testserver.Token(t, "worker-late"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), "sale_paused_fail_closed")
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	// Placed by the draw alone: still handed out.
	r, err = c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/ticket", testserver.Token(t, "worker-drawn-late"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	// Passed on with no origin: 503 overloaded.
	require.NoError(t, <-stopped, "the origin stopped")
	r, err = c.Do(ctx, http.MethodGet, worker+"/sales/"+sale+"/policy", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	require.Equal(t, "2", r.Header.Get("Retry-After"))
	for range 5 {
		st = getStatus(t, c, worker, open, other, otherTicket)
		require.Equal(t, "waiting", st.State)
		require.True(t, st.Stale)
		time.Sleep(200 * time.Millisecond)
	}

	// The origin back on the same address: admitted again.
	testserver.Start(t, dbURL, "--role", "origin", "--addr", addr)
	require.Eventually(t, func() bool {
		st = getStatus(t, c, worker, open, other, otherTicket)
		return st.State == "admitted" && !st.Stale
	}, settle, 100*time.Millisecond, "admitted again once the origin is back: %+v", st)
}
