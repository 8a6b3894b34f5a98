package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// The hostile-client suite: every finding of the security review of the
// running service, reproduced against real `flashline serve` processes, and
// shown fixed. Figures are logged, not asserted, where they are timings: this
// machine is shared.

// TestHostileSlowBodies: one customer token opens connections that send a
// reservation's headers and never its body. Before, the limiter's slot was
// taken before the body was read, 64 such connections held every slot, and
// every other buyer got 503 overloaded. Now the body is read (3 s deadline)
// before any slot, and one customer has at most 4 requests in flight: other
// customers keep buying, the attacker's extra connections are told 429 at
// once, and its first four get 400 when their bodies do not come.
func TestHostileSlowBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--sale-pool-size", "4", "--no-workers")
	c := testserver.NewClient()
	sale := c.CreateSale(t, srv.URL, `{"sku":"sku_slow","initialStock":100000,"perCustomerLimit":1}`)
	mallory := testserver.Token(t, "mallory")

	buyers := func(tag string, n int) (latencies []time.Duration) {
		for i := range n {
			start := time.Now()
			r, err := c.Reserve(context.Background(), srv.URL, sale, testserver.Token(t, fmt.Sprintf("%s-%d", tag, i)), "k", 1)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			latencies = append(latencies, time.Since(start))
		}
		return latencies
	}
	before := buyers("before", 50)

	for _, conns := range []int{64, 1000} {
		t.Run(fmt.Sprint(conns), func(t *testing.T) {
			attack := make([]net.Conn, conns)
			for i := range attack {
				attack[i] = dialHalfRequest(t, srv.URL, "POST", "/sales/"+sale+"/reservations",
					"Authorization: Bearer "+mallory, fmt.Sprintf("Idempotency-Key: slow-%d", i),
					"Content-Type: application/json", "Content-Length: 20")
			}
			during := buyers(fmt.Sprintf("during%d", conns), 50)

			statuses := map[int]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, conn := range attack {
				wg.Go(func() {
					status := readStatus(conn, 10*time.Second)
					mu.Lock()
					statuses[status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			t.Logf("%d slow-body connections of one customer: other buyers' latency p50 %s, max %s (before the attack: p50 %s, max %s); the attacker's answers %v",
				conns, pct(during, 50), slices.Max(during), pct(before, 50), slices.Max(before), statuses)
			// Four at a time are in flight and told 400 when their bodies do
			// not come; the rest, over the customer's cap, 429 at once. On a
			// loaded machine dialing a thousand connections can outlast the
			// 3 s body deadline: a slot freed by a 400 is then taken by a
			// later connection, so more than four may be told 400.
			require.GreaterOrEqual(t, statuses[http.StatusBadRequest], 4, "the four in flight: their bodies never came")
			require.Equal(t, conns, statuses[http.StatusBadRequest]+statuses[http.StatusTooManyRequests], "every slow body is told 400 or 429")
		})
	}
}

// TestHostileHugeIDs: before, GET /sales/<512 KiB id>/policy ×120, without
// login, grew the heap from 6 to 100 MiB for a minute (a negative cache of
// unknown sale ids, and Go's 1 MiB header limit). Now headers are limited to
// 16 KiB (431), an id of a shape the service never makes is 404 before any
// lookup, and unknown ids of the right shape are not cached.
func TestHostileHugeIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	// Memory is measured on the service as shipped: the race detector's
	// build multiplies it.
	srv := testserver.StartPlain(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	ctx := context.Background()
	// A waiting-room sale, so the room is live.
	c.CreateSale(t, srv.URL, `{"sku":"sku_room","initialStock":10,"admission":"waiting_room"}`)

	huge := strings.Repeat("A", 512<<10)
	round := func(n int) map[int]int {
		statuses := map[int]int{}
		for i := range n {
			// 431, or a reset: the server answers and closes as soon as
			// the headers pass 16 KiB, while the client is still sending.
			statuses[rawStatus(t, srv.URL, fmt.Sprintf("GET /sales/sale_%s%d/policy HTTP/1.1\r\n\r\n", huge, i))]++
			r, err := c.Do(ctx, http.MethodGet, fmt.Sprintf("%s/sales/sale_%s%d/policy", srv.URL, huge[:8<<10], i), "", "")
			require.NoError(t, err)
			statuses[r.Status]++
			// Well-formed ids of sales that do not exist: each is read,
			// none kept.
			r, err = c.Do(ctx, http.MethodGet, fmt.Sprintf("%s/sales/sale_%026d/policy", srv.URL, i), "", "")
			require.NoError(t, err)
			statuses[r.Status]++
		}
		return statuses
	}
	round(10) // every path warm, so that what grows is what the ids cost
	time.Sleep(200 * time.Millisecond)
	rssBefore := srv.RSS(t)
	statuses := round(120)
	time.Sleep(500 * time.Millisecond)
	grown := srv.RSS(t) - rssBefore
	t.Logf("120 × (512 KiB id, 8 KiB id, unknown well-formed id): answers %v (0: reset); RSS grew %.1f MiB", statuses, float64(grown)/(1<<20))
	require.Equal(t, 120, statuses[http.StatusRequestHeaderFieldsTooLarge]+statuses[0], "the 512 KiB ids are refused at the door")
	require.Equal(t, 240, statuses[http.StatusNotFound])
	require.Less(t, grown, int64(10<<20), "RSS must grow less than 10 MiB")
}

// TestHostileBytes: before, a paymentInstrument of "\u0000" failed the whole
// batch's statement, which then ran every request alone (60 buyers and 3 such
// requests took 65 transactions instead of 3), and the same bytes in ids, the
// sku or a JWT sub gave 500s and ERROR logs. Now every string a client
// controls is checked before any SQL: 400 (401 for a token), never 500.
func TestHostileBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	ctx := context.Background()
	sale := c.CreateSale(t, srv.URL, `{"sku":"sku_bytes","initialStock":1000,"perCustomerLimit":1,"perInstrumentLimit":5}`)

	t.Run("NULInstrumentDoesNotSplitTheBatch", func(t *testing.T) {
		batchesBefore := metric(t, c, srv.URL, "flashline_reserve_batch_size_count")
		start := make(chan struct{})
		statuses := make([]int, 63)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() {
				instrument := fmt.Sprintf("card-%d", i)
				if i%21 == 0 {
					instrument = `\u0000`
				}
				<-start
				r, err := c.Do(ctx, http.MethodPost, srv.URL+"/sales/"+sale+"/reservations", testserver.Token(t, fmt.Sprintf("buyer-%d", i)),
					fmt.Sprintf(`{"quantity":1,"paymentInstrument":"%s"}`, instrument), "Idempotency-Key", "k")
				if err == nil {
					statuses[i] = r.Status
				}
			})
		}
		close(start)
		wg.Wait()
		batches := metric(t, c, srv.URL, "flashline_reserve_batch_size_count") - batchesBefore
		t.Logf("60 buyers and 3 NUL instruments at once: %.0f purchase transactions", batches)
		for i, s := range statuses {
			if i%21 == 0 {
				require.Equal(t, http.StatusBadRequest, s, "request %d", i)
			} else {
				require.Equal(t, http.StatusCreated, s, "request %d", i)
			}
		}
		require.Less(t, batches, 30.0, "the buyers were coalesced, not run one by one")
	})

	t.Run("NeverA500", func(t *testing.T) {
		for _, tt := range []struct {
			name, method, path, token, body string
			headers                         []string
			status                          int
		}{
			{"SaleIDWithNUL", http.MethodGet, "/sales/sale_%00/policy", "", "", nil, 404},
			{"ReservationIDWithNUL", http.MethodGet, "/reservations/res_%00", testserver.Token(t, "alice"), "", nil, 404},
			{"SKUWithNUL", http.MethodPost, "/admin/sales", testserver.AdminToken, `{"sku":"a\u0000b","initialStock":1}`, nil, 400},
			{"SKUWithZeroWidthSpace", http.MethodPost, "/admin/sales", testserver.AdminToken, `{"sku":"a\u200bb","initialStock":1}`, nil, 400},
			{"SubWithNUL", http.MethodPost, "/sales/" + sale + "/reservations", testserver.Token(t, "a\x00b"), `{"quantity":1}`, []string{"Idempotency-Key", "k"}, 401},
			{"SubWithEscape", http.MethodGet, "/sales/" + sale + "/ticket", testserver.Token(t, "a\x1b[2Jb"), "", nil, 401},
			{"InstrumentWithNUL", http.MethodPost, "/sales/" + sale + "/reservations", testserver.Token(t, "nul"), `{"quantity":1,"paymentInstrument":"a\u0000"}`, []string{"Idempotency-Key", "k"}, 400},
			{"InstrumentWithBidiOverride", http.MethodPost, "/sales/" + sale + "/reservations", testserver.Token(t, "bidi"), `{"quantity":1,"paymentInstrument":"\u202e1-drac"}`, []string{"Idempotency-Key", "k"}, 400},
		} {
			r, err := c.Do(ctx, tt.method, srv.URL+tt.path, tt.token, tt.body, tt.headers...)
			require.NoError(t, err, tt.name)
			require.Equal(t, tt.status, r.Status, "%s: %s", tt.name, r.Body)
		}
	})
	require.NotContains(t, srv.Logs(), "level=ERROR", "no hostile byte is an internal error")
}

// TestHostileInstrumentSpellings: before, perInstrumentLimit was bypassed by
// "CARD-1", " card-1", zero-width or full-width forms of one card. Now the
// fingerprint (the customer token's payment_instrument claim: the body's is
// ignored) is trimmed, NFKC-normalised and case-folded before it counts,
// and a token whose claim has format characters proves nothing.
func TestHostileInstrumentSpellings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	ctx := context.Background()
	sale := c.CreateSale(t, srv.URL, `{"sku":"sku_card","initialStock":100,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	for i, tt := range []struct {
		instrument string
		status     int
		code       string
	}{
		{"card-1", 201, ""},
		{"CARD-1", 409, "limit_reached"},
		{" card-1", 409, "limit_reached"},
		{"ｃａｒｄ－１", 409, "limit_reached"},
		{"card\u200b-1", 401, "unauthenticated"},
		{"card\u2060-1", 401, "unauthenticated"},
		{"card-2", 201, ""},
	} {
		tok, err := auth.MintInstrument(testserver.JWTSecret, fmt.Sprintf("shopper-%d", i), time.Hour, time.Time{}, tt.instrument)
		require.NoError(t, err)
		r, err := c.Do(ctx, http.MethodPost, srv.URL+"/sales/"+sale+"/reservations", tok, `{"quantity":1,"paymentInstrument":"card-9"}`, "Idempotency-Key", "k")
		require.NoError(t, err)
		require.Equal(t, tt.status, r.Status, "%q: %s", tt.instrument, r.Body)
		if tt.code != "" {
			require.Equal(t, tt.code, errorCode(r.Body), "%q", tt.instrument)
		}
	}
}

// TestHostileExposure: before, /metrics was public and named sales that had
// not opened (a bot read the id and took position 1 of an arrival-order room
// two hours early), a 1 MiB header was accepted, and a slowloris held a connection
// for as long as it liked (/readyz, which told anyone the database's user,
// name and address, is handlers' TestReadyzHidesTheCause). Now /metrics is the admin's (or on a listener of
// its own) and never names a sale before it opens, headers are limited to
// 16 KiB, and a request's headers must arrive within
// 10 s.
func TestHostileExposure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--metrics-addr", "127.0.0.1:0")
	c := testserver.NewClient()
	ctx := context.Background()
	opensAt := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	hidden := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_hidden","initialStock":10,"admission":"waiting_room","fairness":"arrival_order","opensAt":%q}`, opensAt))
	open := c.CreateSale(t, srv.URL, `{"sku":"sku_open","initialStock":10,"admission":"waiting_room","fairness":"arrival_order"}`)
	_, err := c.Do(ctx, http.MethodPost, srv.URL+"/admin/sales/"+open+"/open", testserver.AdminToken, "")
	require.NoError(t, err)
	// The room and the invariant job have seen both sales.
	for _, s := range []string{hidden, open} {
		r, err := c.Do(ctx, http.MethodGet, srv.URL+"/sales/"+s+"/ticket", testserver.Token(t, "early-bird"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	time.Sleep(3 * time.Second)

	r, err := c.Do(ctx, http.MethodGet, srv.URL+"/metrics", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	r, err = c.Do(ctx, http.MethodGet, srv.URL+"/metrics", testserver.Token(t, "bot"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, r.Status)
	asAdmin, err := c.Do(ctx, http.MethodGet, srv.URL+"/metrics", testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, asAdmin.Status)
	m := regexp.MustCompile(`msg="flashline: metrics" url=(http://\S+)`).FindStringSubmatch(srv.Logs())
	require.NotNil(t, m, "the metrics listener's address is logged")
	private, err := c.Do(ctx, http.MethodGet, m[1], "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, private.Status)
	for _, body := range [][]byte{asAdmin.Body, private.Body} {
		require.Contains(t, string(body), open, "an open sale is named")
		require.NotContains(t, string(body), hidden, "a sale that has not opened is never named")
	}
	base, _ := strings.CutSuffix(m[1], "/metrics")
	profiler, err := c.Do(ctx, http.MethodGet, base+"/debug/pprof/", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, profiler.Status, "no profiler without --pprof")

	t.Run("HeadersOver16KiB", func(t *testing.T) {
		status := rawStatus(t, srv.URL, "GET /healthz HTTP/1.1\r\nX-Padding: "+strings.Repeat("x", 32<<10)+"\r\n\r\n")
		require.Contains(t, []int{http.StatusRequestHeaderFieldsTooLarge, 0}, status, "431, or a reset while the client still sends")
	})

	t.Run("Slowloris", func(t *testing.T) {
		conn := dialHalfRequest(t, srv.URL, "GET", "/healthz") // headers never finished
		start := time.Now()
		_, err := io.ReadAll(conn)
		require.NoError(t, err, "the server closes the connection")
		t.Logf("a request whose headers never end: connection closed after %s", time.Since(start).Round(100*time.Millisecond))
		require.Less(t, time.Since(start), 20*time.Second)
	})
}

// TestHostileWeakSecrets: before, `serve --admin-token a --jwt-secret b`
// started, and the waiting-room keys derived from the JWT secret by default,
// so whoever issues customer JWTs could mint admission tokens. Now serve
// refuses secrets under 32 bytes and missing waiting-room keys, unless
// --demo.
func TestHostileWeakSecrets(t *testing.T) {
	t.Parallel()
	strong := strings.Repeat("s", 32)
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"ShortAdminToken", map[string]string{"FLASHLINE_ADMIN_TOKEN": "a", "FLASHLINE_JWT_SECRET": strong, "FLASHLINE_WAITROOM_KEYS": "k1:" + strong}, "FLASHLINE_ADMIN_TOKEN is 1 bytes"},
		{"ShortJWTSecret", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": "b", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong}, "FLASHLINE_JWT_SECRET is 1 bytes"},
		{"DevelopmentValues", map[string]string{"FLASHLINE_ADMIN_TOKEN": "dev-admin-token", "FLASHLINE_JWT_SECRET": "dev-jwt-secret"}, "only --demo allows development values"},
		{"NoWaitingRoomKeys", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": strong + "x"}, "FLASHLINE_WAITROOM_KEYS must be set"},
		{"ShortWaitingRoomKey", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": strong + "x", "FLASHLINE_WAITROOM_KEYS": "k1:short"}, "want at least 32"},
		{"WaitingRoomKeyIsTheJWTSecret", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": strong + "x", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong + "x"}, "a secret of its own"},
		{"ShortStripeSecret", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": strong + "x", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong + "y", "FLASHLINE_STRIPE_WEBHOOK_SECRET": "whsec_" + strong + ",whsec_short"}, "FLASHLINE_STRIPE_WEBHOOK_SECRET is 11 bytes"},
		{"StripeSecretIsTheAdminToken", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": strong + "x", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong + "y", "FLASHLINE_STRIPE_WEBHOOK_SECRET": strong}, "secrets of their own"},
		{"AdyenKeyNotHex", map[string]string{"FLASHLINE_ADMIN_TOKEN": strong, "FLASHLINE_JWT_SECRET": strong + "x", "FLASHLINE_WAITROOM_KEYS": "k1:" + strong + "y", "FLASHLINE_ADYEN_HMAC_KEY": "not-hex"}, "FLASHLINE_ADYEN_HMAC_KEY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.env["DATABASE_URL"] = "postgres://127.0.0.1:1/none"
			var stderr bytes.Buffer
			err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return tt.env[k] }, io.Discard, &stderr)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestHostileColdBurst: before, 150 cancels and 30 confirms at once on a
// freshly started instance with no reservation traffic got 58 answers of 503
// overloaded (they shared the purchase path's limiter, whose limit starts
// low). Confirm and cancel are never shed now: a burst queues for their pool.
// The admission limiter refuses none of them (its counter stays at 0); the
// wait for the pool is bounded (postgres.RoleWait, 5 s), past which a request
// is answered 503 overloaded by design, and a busy machine can stretch the
// tail of 180 at once past it (a fresh-clone run beside other work did): such
// an answer is retried after its Retry-After, as a client does, and every
// hold ends confirmed or cancelled.
func TestHostileColdBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	warm := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	ctx := context.Background()
	sale := c.CreateSale(t, warm.URL, `{"sku":"sku_burst","initialStock":180,"perCustomerLimit":1,"confirmation":"customer"}`)
	type hold struct{ id, token string }
	holds := make([]hold, 180)
	for i := range holds {
		tok := testserver.Token(t, fmt.Sprintf("holder-%d", i))
		r, err := c.Reserve(ctx, warm.URL, sale, tok, "k", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		holds[i] = hold{id: reservationID(t, r.Body), token: tok}
	}

	fresh := testserver.Start(t, dbURL, "--no-workers")
	start := make(chan struct{})
	statuses := make([]int, len(holds))
	var wg sync.WaitGroup
	for i, h := range holds {
		action := "cancel"
		if i < 30 {
			action = "confirm"
		}
		wg.Go(func() {
			<-start
			for range 30 {
				r, err := c.Do(ctx, http.MethodPost, fresh.URL+"/reservations/"+h.id+"/"+action, h.token, "")
				if err != nil {
					return
				}
				statuses[i] = r.Status
				if r.Status != http.StatusServiceUnavailable || errorCode(r.Body) != "overloaded" {
					return
				}
				time.Sleep(time.Second) // its Retry-After
			}
		})
	}
	close(start)
	wg.Wait()
	require.Positive(t, metric(t, c, fresh.URL, "flashline_loadshed_limit"), "the instance has its admission limiter")
	require.Zero(t, metric(t, c, fresh.URL, "flashline_loadshed_shed_total"), "the admission limiter shed a confirm or a cancel")
	for i, s := range statuses {
		require.Equal(t, http.StatusOK, s, "hold %d", i)
	}
}

// dialHalfRequest opens a connection to base and sends the request line and
// the given headers, but not the blank line that ends them (no headers:
// the request line only, unfinished) nor any body: the client who never
// finishes.
func dialHalfRequest(t *testing.T, base, method, path string, headers ...string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	req := method + " " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\n"
	if len(headers) > 0 {
		req += strings.Join(headers, "\r\n") + "\r\n\r\n"
	}
	_, err = io.WriteString(conn, req)
	require.NoError(t, err)
	return conn
}

// rawStatus sends request (a whole HTTP request, Host header added) on a
// connection of its own while reading the answer's status (0: the connection
// was reset or closed before one came).
func rawStatus(t *testing.T, base, request string) int {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	line, rest, _ := strings.Cut(request, "\r\n")
	go func() { _, _ = io.WriteString(conn, line+"\r\nHost: "+u.Host+"\r\n"+rest) }()
	return readStatus(conn, 10*time.Second)
}

// readStatus reads the status code of the answer on conn (0 if none came
// within wait).
func readStatus(conn net.Conn, wait time.Duration) int {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return 0
	}
	status, _ := strconv.Atoi(fields[1])
	return status
}

// metric reads one unlabelled sample from the server's /metrics.
func metric(t *testing.T, c *testserver.Client, base, name string) float64 {
	t.Helper()
	r, err := c.Do(context.Background(), http.MethodGet, base+"/metrics", testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status)
	for line := range strings.Lines(string(r.Body)) {
		if value, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

func reservationID(t *testing.T, body []byte) string {
	t.Helper()
	m := regexp.MustCompile(`"reservationId":"([^"]+)"`).FindSubmatch(body)
	require.NotNil(t, m, "%s", body)
	return string(m[1])
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(100 * time.Microsecond)
}

// TestPprofOnlyWithFlag: Go's profiler, unauthenticated, used to be mounted on
// --metrics-addr always, so whoever reached that address could take CPU
// profiles and traces of the service (each one costing it while it runs).
// Now it is there only with --pprof (or FLASHLINE_PPROF), which
// scripts/profile.sh passes. Edges serve the same private mux as origins and
// need no database, so they are what is started here (an origin without
// --pprof is TestHostileExposure's).
func TestPprofOnlyWithFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	origins := []string{"http://" + testserver.FreeAddr(t)} // none answers: the edge serves stale
	for _, tc := range []struct {
		name   string
		env    []string
		flags  []string
		status int
	}{
		{"NotFoundByDefault", nil, nil, http.StatusNotFound},
		{"ServedWithFlag", nil, []string{"--pprof"}, http.StatusOK},
		{"ServedWithEnv", []string{"FLASHLINE_PPROF=true"}, nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartEdgeEnv(t, origins, tc.env, append([]string{"--metrics-addr", "127.0.0.1:0"}, tc.flags...)...)
			m := regexp.MustCompile(`msg="flashline: metrics" url=(http://\S+)/metrics`).FindStringSubmatch(srv.Logs())
			require.NotNil(t, m, "the metrics listener's address is logged")
			c := testserver.NewClient()
			r, err := c.Do(context.Background(), http.MethodGet, m[1]+"/metrics", "", "")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, r.Status, "/metrics is served either way")
			r, err = c.Do(context.Background(), http.MethodGet, m[1]+"/debug/pprof/", "", "")
			require.NoError(t, err)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
		})
	}
}
