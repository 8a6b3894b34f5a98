package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/webhook"
)

const notifySecret = "test-notify-secret-0123456789abcdefgh"

// notifyReceiver is the store's webhook in a test: it refuses the first
// failFirst deliveries of every event (500), checks every signature, and
// counts what it accepted per event id.
type notifyReceiver struct {
	failFirst int
	verifier  *webhook.Verifier
	mu        sync.Mutex
	attempts  map[string]int
	accepted  map[string]int
	kinds     map[string]string
	bad       []string
}

func (r *notifyReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var event struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.verifier.Verify(req.Header.Get(webhook.Header), body); err != nil || json.Unmarshal(body, &event) != nil ||
		event.ID == "" || event.ID != req.Header.Get("Flashline-Event-Id") {
		r.bad = append(r.bad, fmt.Sprintf("%v %s", err, body))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.attempts[event.ID]++
	if r.attempts[event.ID] <= r.failFirst {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.accepted[event.ID]++
	r.kinds[event.ID] = event.Type
	w.WriteHeader(http.StatusNoContent)
}

// TestLotteryEndToEnd: a lottery on three serve processes. Customers register
// at once on every instance (one registration each), the draw runs at drawAt
// by itself (River), winners buy and losers cannot, a winner who does not buy
// passes the unit to the next on the waitlist once, every notification
// reaches a webhook that fails the first attempts, once each, and the draw
// is verified from the revealed seed.
func TestLotteryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	recv := &notifyReceiver{failFirst: 2, verifier: webhook.NewVerifier(notifySecret),
		attempts: map[string]int{}, accepted: map[string]int{}, kinds: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hook := httptest.NewUnstartedServer(recv)
	hook.Listener.Close()
	hook.Listener = ln
	hook.Start()
	t.Cleanup(hook.Close)

	env := []string{"FLASHLINE_NOTIFY_URL=" + hook.URL + "/notify", "FLASHLINE_NOTIFY_SECRET=" + notifySecret}
	servers := make([]*testserver.Server, 3)
	for i := range servers {
		servers[i] = testserver.StartEnv(t, dbURL, env, "--lottery-grace", "1s", "--admin-pool-size", "3", "--river-pool-size", "2")
	}
	c := testserver.NewClient()

	// The lottery's clock is moved by the test, in the database, whose
	// clock the lottery reads: registration closes and the draw comes when
	// every registration is in, and winner 3's window ends when the test
	// has seen the others buy, however slowly a loaded machine goes. The
	// purchase window is then long enough for anything else.
	const units, customers, window = 3, 24, 120
	now := time.Now().UTC()
	drawAt := now.Add(time.Hour).Truncate(time.Second)
	sale := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"lottery","initialStock":%d,"confirmation":"customer",
		"admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,
		"purchaseWindowSeconds":%d,"waitlist":true}`, units,
		now.Add(-time.Second).Format(time.RFC3339), drawAt.Format(time.RFC3339), drawAt.Format(time.RFC3339), window))

	// Every customer registers on all three instances at once.
	tokens := make(map[string]string, customers)
	for i := range customers {
		id := fmt.Sprintf("cust-%02d", i)
		tokens[id] = testserver.Token(t, id)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  = map[string]map[string]bool{}
		errs []string
	)
	for id, tok := range tokens {
		for _, s := range servers {
			wg.Go(func() {
				r, err := c.Do(ctx, http.MethodPost, s.URL+"/sales/"+sale+"/registrations", tok, `{"paymentInstrument":"card-`+id+`"}`)
				mu.Lock()
				defer mu.Unlock()
				var reg struct {
					RegistrationID string `json:"registrationId"`
					State          string `json:"state"`
				}
				if err != nil || r.Status != http.StatusCreated || json.Unmarshal(r.Body, &reg) != nil || reg.State != "registered" {
					errs = append(errs, fmt.Sprintf("%s: %v %d %s", id, err, r.Status, r.Body))
					return
				}
				if ids[id] == nil {
					ids[id] = map[string]bool{}
				}
				ids[id][reg.RegistrationID] = true
			})
		}
	}
	wg.Wait()
	require.Empty(t, errs)
	for id, got := range ids {
		require.Len(t, got, 1, "%s got several registrations", id)
	}
	require.Equal(t, customers, lotteryCount(t, pool, `SELECT count(*) FROM lottery_registrations WHERE sale_id = $1`, sale))

	// The draw, by itself at drawAt, which comes now (the sale's opensAt
	// stays an hour away: it is opened below, once the draw is seen).
	_, err = pool.Exec(ctx, `UPDATE lotteries SET registration_closes_at = now(), draw_at = now() WHERE sale_id = $1`, sale)
	require.NoError(t, err)
	waitFor(t, 20*time.Second, "the draw", func() bool {
		return lotteryCount(t, pool, `SELECT count(*) FROM lotteries WHERE sale_id = $1 AND drawn_at IS NOT NULL`, sale) == 1
	})
	// The sale opens at drawAt, which the test moved; it opens now.
	_, _, err = runCLI(t, dbURL, "sale", "open", sale)
	require.NoError(t, err)
	var drawLag float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT extract(epoch FROM drawn_at - draw_at) FROM lotteries WHERE sale_id = $1`, sale).Scan(&drawLag))
	t.Logf("lottery: %d customers registered on 3 instances at once (each on all three): one registration each; drawn %.3f s after drawAt", customers, drawLag)
	type registration struct {
		State          string `json:"state"`
		DrawRank       int    `json:"drawRank"`
		AdmissionToken string `json:"admissionToken"`
	}
	regOf := func(id string) registration {
		r, err := c.Do(ctx, http.MethodGet, servers[len(id)%3].URL+"/sales/"+sale+"/registration", tokens[id], "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var reg registration
		require.NoError(t, json.Unmarshal(r.Body, &reg))
		return reg
	}
	buy := func(id string) {
		t.Helper()
		reg := regOf(id)
		r, err := c.Do(ctx, http.MethodPost, servers[1].URL+"/sales/"+sale+"/reservations", tokens[id], `{}`,
			"Idempotency-Key", "buy-"+id, "X-Admission-Token", reg.AdmissionToken)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		var res struct {
			ReservationID string `json:"reservationId"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &res))
		r, err = c.Do(ctx, http.MethodPost, servers[2].URL+"/reservations/"+res.ReservationID+"/confirm", tokens[id], "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	// Who drew what, from the database; the winners are asked first and
	// winners 1 and 2 buy at once, within their window however slowly the
	// losers' checks below go on a loaded machine. Winner 3 lets it pass.
	byRank := make([]string, customers+1)
	rows, err := pool.Query(ctx, `SELECT customer_id, draw_rank FROM lottery_registrations WHERE sale_id = $1`, sale)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var rank int
		require.NoError(t, rows.Scan(&id, &rank))
		require.True(t, rank >= 1 && rank <= customers && byRank[rank] == "", "draw rank %d", rank)
		byRank[rank] = id
	}
	require.NoError(t, rows.Err())
	for rank := 1; rank <= units; rank++ {
		reg := regOf(byRank[rank])
		require.Equal(t, rank, reg.DrawRank)
		require.Equal(t, "won", reg.State)
	}
	buy(byRank[1])
	buy(byRank[2])
	for rank := units + 1; rank <= customers; rank++ {
		id := byRank[rank]
		reg := regOf(id)
		require.Equal(t, rank, reg.DrawRank)
		require.Equal(t, "waitlisted", reg.State)
		r, err := c.Reserve(ctx, servers[0].URL, sale, tokens[id], "k-"+id, 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, r.Status, "a loser cannot buy: %s", r.Body)
	}
	// Winner 3's window ends, unbought.
	_, err = pool.Exec(ctx, `UPDATE lottery_registrations SET purchase_window_ends_at = now() - interval '1 hour'
		WHERE sale_id = $1 AND customer_id = $2`, sale, byRank[3])
	require.NoError(t, err)
	waitFor(t, 20*time.Second, "the unbought window passed down", func() bool {
		return regOf(byRank[units+1]).State == "won"
	})
	require.Equal(t, "expired", regOf(byRank[3]).State)
	buy(byRank[units+1])
	// Nothing more is passed down: every unit is sold.
	time.Sleep(3 * time.Second)
	require.Equal(t, "waitlisted", regOf(byRank[units+2]).State)
	require.Equal(t, 1, lotteryCount(t, pool, `SELECT count(*) FROM lottery_registrations WHERE sale_id = $1 AND state = 'expired'`, sale))
	require.Equal(t, units, lotteryCount(t, pool, `SELECT count(*) FROM lottery_registrations WHERE sale_id = $1 AND state = 'won'`, sale))
	require.Equal(t, units, lotteryCount(t, pool, `SELECT count(*) FROM reservations WHERE sale_id = $1 AND state = 'confirmed'`, sale))

	// Every notification delivered, once each, after two refusals.
	events := customers + 2 // won or waitlisted each, one window expired, one promotion
	require.Equal(t, events, lotteryCount(t, pool, `SELECT count(*) FROM lottery_notifications WHERE sale_id = $1`, sale))
	waitFor(t, 30*time.Second, "every notification delivered", func() bool {
		return lotteryCount(t, pool, `SELECT count(*) FROM lottery_notifications WHERE sale_id = $1 AND delivered_at IS NULL`, sale) == 0
	})
	var p50, worst float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM delivered_at - created_at)),
		max(extract(epoch FROM delivered_at - created_at)) FROM lottery_notifications WHERE sale_id = $1`, sale).Scan(&p50, &worst))
	t.Logf("lottery: %d notifications, each refused twice by the webhook first: delivered %.1f s (median), %.1f s (max) after being written", events, p50, worst)
	recv.mu.Lock()
	require.Empty(t, recv.bad)
	require.Len(t, recv.accepted, events)
	kinds := map[string]int{}
	for id, n := range recv.accepted {
		require.Equal(t, 1, n, "event %s accepted %d times", id, n)
		require.Equal(t, 3, recv.attempts[id], "event %s", id)
		kinds[recv.kinds[id]]++
	}
	recv.mu.Unlock()
	require.Equal(t, map[string]int{"lottery.won": units, "lottery.waitlisted": customers - units,
		"lottery.window_expired": 1, "lottery.promoted": 1}, kinds)

	// The instances count what they sent: each event refused twice, then delivered.
	outcomes := map[string]float64{}
	for _, s := range servers {
		r, err := c.Do(ctx, http.MethodGet, s.URL+"/metrics", testserver.AdminToken, "")
		require.NoError(t, err)
		for line := range strings.Lines(string(r.Body)) {
			for _, o := range []string{"delivered", "failed"} {
				var v float64
				if _, err := fmt.Sscanf(line, `flashline_lottery_notifications_total{outcome="`+o+`"} %g`, &v); err == nil {
					outcomes[o] += v
				}
			}
		}
	}
	require.Equal(t, map[string]float64{"delivered": float64(events), "failed": float64(2 * events)}, outcomes)

	// The draw, verified from its transcript alone (no database).
	out, _, err := runCLI(t, "", "sale", "verify-draw", sale, "--url", servers[2].URL, "--customer", byRank[1])
	require.NoError(t, err, out)
	require.Contains(t, out, "The draw checks out")
	require.Contains(t, out, "no beacon")
	t.Log(out)
	// Two ranks swapped in the record are caught.
	_, err = pool.Exec(ctx, `UPDATE lottery_registrations SET draw_rank = CASE draw_rank WHEN 1 THEN 2 ELSE 1 END
		WHERE sale_id = $1 AND draw_rank IN (1, 2)`, sale)
	require.NoError(t, err)
	out, _, err = runCLI(t, "", "sale", "verify-draw", sale, "--url", servers[2].URL)
	require.ErrorIs(t, err, errDrawMismatch)
	require.Contains(t, out, `the "ranks" step fails`)
}

func lotteryCount(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}
