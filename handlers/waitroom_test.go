package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// newWaitroomServer is newServer with the waiting room wired in.
func newWaitroomServer(t *testing.T, opts waitroom.Options) *server { return startServer(t, &opts) }

// keysOf decodes a JSON object and returns its keys, sorted.
func keysOf(t testing.TB, body []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type ticketJSON struct {
	Token                string             `json:"token"`
	Position             int64              `json:"position"`
	PositionRange        *api.PositionRange `json:"positionRange"`
	EstimatedWaitSeconds int64              `json:"estimatedWaitSeconds"`
	PollAfterMs          int64              `json:"pollAfterMs"`
	Policy               string             `json:"policy"`
	Challenge            *struct {
		Nonce string `json:"nonce"`
		Bits  int    `json:"bits"`
	} `json:"challenge"`
}

type statusJSON struct {
	Held                 bool               `json:"held"`
	Message              string             `json:"message"`
	State                string             `json:"state"`
	Position             int64              `json:"position"`
	PositionRange        *api.PositionRange `json:"positionRange"`
	EstimatedWaitSeconds int64              `json:"estimatedWaitSeconds"`
	PollAfterMs          int64              `json:"pollAfterMs"`
	Paused               bool               `json:"paused"`
	Challenge            *struct {
		Nonce string `json:"nonce"`
		Bits  int    `json:"bits"`
	} `json:"challenge"`
	AdmissionToken string `json:"admissionToken"`
	ExpiresIn      int    `json:"expiresIn"`
}

func (s *server) ticket(t testing.TB, saleID, authorization, previous string) ticketJSON {
	t.Helper()
	path := "/sales/" + saleID + "/ticket"
	if previous != "" {
		path += "?token=" + url.QueryEscape(previous)
	}
	r := s.do(t, http.MethodGet, path, authorization, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	var tk ticketJSON
	require.NoError(t, json.Unmarshal(r.Body, &tk))
	keys := []string{"challenge", "estimatedWaitSeconds", "policy", "pollAfterMs", "position", "token"}
	if tk.PositionRange != nil {
		// A place by the draw: an estimate, with its quartiles around it.
		keys = []string{"challenge", "estimatedWaitSeconds", "policy", "pollAfterMs", "position", "positionRange", "token"}
		require.LessOrEqual(t, tk.PositionRange.P25, tk.Position)
		require.GreaterOrEqual(t, tk.PositionRange.P75, tk.Position)
	}
	require.Equal(t, keys, keysOf(t, r.Body))
	return tk
}

func (s *server) status(t *testing.T, saleID, authorization, token, solution string) (statusJSON, []string) {
	t.Helper()
	q := url.Values{"token": {token}}
	if solution != "" {
		q.Set("solution", solution)
	}
	r := s.do(t, http.MethodGet, "/sales/"+saleID+"/status?"+q.Encode(), authorization, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var st statusJSON
	require.NoError(t, json.Unmarshal(r.Body, &st))
	return st, keysOf(t, r.Body)
}

func TestCreateSaleWaitingRoomFields(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		r := s.do(t, http.MethodPost, "/admin/sales", adminAuth, `{"sku":"sku_1","initialStock":5}`)
		require.Equal(t, 201, r.Status, "%s", r.Body)
		var v map[string]any
		require.NoError(t, json.Unmarshal(r.Body, &v))
		require.Equal(t, "randomized_at_open", v["fairness"])
		require.EqualValues(t, 0, v["challengeBits"])
		require.Contains(t, v, "perInstrumentLimit")
		require.Nil(t, v["perInstrumentLimit"])
		require.EqualValues(t, 0, v["minAccountAgeSeconds"])
	})
	t.Run("AllGiven", func(t *testing.T) {
		t.Parallel()
		body := `{"sku":"sku_2","initialStock":5,"admission":"waiting_room","fairness":"arrival_order",
			"challengeBits":12,"perInstrumentLimit":2,"minAccountAgeSeconds":86400}`
		r := s.do(t, http.MethodPost, "/admin/sales", adminAuth, body)
		require.Equal(t, 201, r.Status, "%s", r.Body)
		var v api.Sale
		require.NoError(t, json.Unmarshal(r.Body, &v))
		require.Equal(t, "arrival_order", v.Fairness)
		require.Equal(t, 12, v.ChallengeBits)
		require.NotNil(t, v.PerInstrumentLimit)
		require.Equal(t, 2, *v.PerInstrumentLimit)
		require.Equal(t, 86400, v.MinAccountAgeSeconds)
		again := s.do(t, http.MethodGet, "/admin/sales/"+v.SaleID, adminAuth, "")
		var got api.Sale
		require.NoError(t, json.Unmarshal(again.Body, &got))
		require.Equal(t, v.Fairness, got.Fairness)
		require.Equal(t, *v.PerInstrumentLimit, *got.PerInstrumentLimit)
	})
	t.Run("NullPerInstrumentLimitIsNone", func(t *testing.T) {
		t.Parallel()
		r := s.do(t, http.MethodPost, "/admin/sales", adminAuth, `{"sku":"sku_3","initialStock":5,"perInstrumentLimit":null}`)
		require.Equal(t, 201, r.Status, "%s", r.Body)
	})
	for _, tt := range []struct{ name, body string }{
		{"FairnessUnknown", `{"sku":"s","initialStock":5,"fairness":"lottery"}`},
		{"FairnessNotString", `{"sku":"s","initialStock":5,"fairness":1}`},
		{"ChallengeBitsNegative", `{"sku":"s","initialStock":5,"admission":"waiting_room","challengeBits":-1}`},
		{"ChallengeBits33", `{"sku":"s","initialStock":5,"admission":"waiting_room","challengeBits":33}`},
		{"ChallengeBitsOnDirectSale", `{"sku":"s","initialStock":5,"challengeBits":8}`},
		{"PerInstrumentLimitZero", `{"sku":"s","initialStock":5,"perInstrumentLimit":0}`},
		{"PerInstrumentLimitNegative", `{"sku":"s","initialStock":5,"perInstrumentLimit":-1}`},
		{"PerInstrumentLimitAboveMax", `{"sku":"s","initialStock":5,"perInstrumentLimit":1001}`},
		{"MinAccountAgeNegative", `{"sku":"s","initialStock":5,"minAccountAgeSeconds":-1}`},
		{"MinAccountAgeAboveMax", `{"sku":"s","initialStock":5,"minAccountAgeSeconds":315360001}`},
		{"WrongCaseKey", `{"sku":"s","initialStock":5,"ChallengeBits":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireError(t, s.do(t, http.MethodPost, "/admin/sales", adminAuth, tt.body), 400, "invalid_request")
		})
	}
}

func TestWaitingRoom(t *testing.T) {
	t.Parallel()
	s := newWaitroomServer(t, waitroom.Options{TicketsPerMinute: 5})
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	later := opensAt.Format(time.RFC3339)
	scheduled := s.createSale(t, `{"sku":"sku_w","initialStock":5,"admission":"waiting_room","opensAt":"`+later+`"}`)

	t.Run("TicketAndStatusBeforeTheOpen", func(t *testing.T) {
		t.Parallel()
		alice := customer(t, "alice")
		tk := s.ticket(t, scheduled.SaleID, alice, "")
		// The estimate counts the time until the open, as it stands when
		// asked: a parallel subtest may start minutes after its parent on a
		// busy machine, so the bound is read after the answer (a second
		// for the database clock's estimate).
		untilOpen := int64(time.Until(opensAt) / time.Second)
		require.NotEmpty(t, tk.Token)
		require.Positive(t, tk.Position)
		require.GreaterOrEqual(t, tk.EstimatedWaitSeconds, untilOpen-1)
		require.Greater(t, untilOpen, int64(60), "the sale has not come near its open")
		require.Positive(t, tk.PollAfterMs)
		require.Equal(t, "randomized_at_open", tk.Policy)
		require.Nil(t, tk.Challenge)

		again := s.ticket(t, scheduled.SaleID, alice, tk.Token)
		require.Equal(t, tk.Token, again.Token)

		st, keys := s.status(t, scheduled.SaleID, alice, tk.Token, "")
		require.Equal(t, "waiting", st.State)
		require.Equal(t, []string{"estimatedWaitSeconds", "pollAfterMs", "position", "positionRange", "state"}, keys)
		require.Equal(t, &api.PositionRange{P25: 1, P75: 1}, st.PositionRange, "alone in the crowd")
	})
	t.Run("Auth", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/ticket", "/status?token=x"} {
			requireError(t, s.do(t, http.MethodGet, "/sales/"+scheduled.SaleID+path, "", ""), 401, "unauthenticated")
			requireError(t, s.do(t, http.MethodGet, "/sales/"+scheduled.SaleID+path, adminAuth, ""), 403, "forbidden")
		}
	})
	t.Run("StatusWithSomeoneElsesTicket", func(t *testing.T) {
		t.Parallel()
		// A sale of its own: carol's ticket would join the crowd alice is
		// alone in (TicketAndStatusBeforeTheOpen).
		other := s.createSale(t, `{"sku":"sku_w2","initialStock":5,"admission":"waiting_room","opensAt":"`+later+`"}`)
		tk := s.ticket(t, other.SaleID, customer(t, "carol"), "")
		q := "?token=" + url.QueryEscape(tk.Token)
		requireError(t, s.do(t, http.MethodGet, "/sales/"+other.SaleID+"/status"+q, customer(t, "mallory"), ""), 403, "admission_invalid")
		requireError(t, s.do(t, http.MethodGet, "/sales/"+other.SaleID+"/status?token=forged", customer(t, "carol"), ""), 403, "admission_invalid")
		requireError(t, s.do(t, http.MethodGet, "/sales/"+other.SaleID+"/status", customer(t, "carol"), ""), 403, "admission_invalid")
	})
	t.Run("Policy", func(t *testing.T) {
		t.Parallel()
		r := s.do(t, http.MethodGet, "/sales/"+scheduled.SaleID+"/policy", "", "")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		// Before the open: the commitment, never the seed.
		require.Equal(t, []string{"description", "drawCommitment", "imageUrl", "opensAt", "policy", "title"}, keysOf(t, r.Body))
		var p api.Policy
		require.NoError(t, json.Unmarshal(r.Body, &p))
		require.Equal(t, "randomized_at_open", p.Policy)
		require.Contains(t, p.Description, "draw")
		var seed []byte
		require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT draw_seed FROM sales WHERE sale_id = $1`, scheduled.SaleID).Scan(&seed))
		require.Equal(t, flashline.DrawCommitment(seed), p.DrawCommitment)
		require.Empty(t, p.DrawSeed)

		// From the open: the seed, which matches the commitment.
		open := s.createSale(t, `{"sku":"sku_open","initialStock":5,"admission":"waiting_room"}`)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+open.SaleID+"/open", adminAuth, ""), 200)
		var o api.Policy
		require.Eventually(t, func() bool { // once the cache has heard of the open
			r = s.do(t, http.MethodGet, "/sales/"+open.SaleID+"/policy", "", "")
			require.Equal(t, 200, r.Status, "%s", r.Body)
			require.NoError(t, json.Unmarshal(r.Body, &o))
			return o.DrawSeed != ""
		}, 5*time.Second, 20*time.Millisecond)
		r = s.do(t, http.MethodGet, "/sales/"+open.SaleID+"/policy", "", "")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		got, err := flashline.VerifyDrawSeed(o.DrawCommitment, o.DrawSeed)
		require.NoError(t, err, "%s", r.Body)
		require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT draw_seed FROM sales WHERE sale_id = $1`, open.SaleID).Scan(&seed))
		require.Equal(t, seed, got)
		requireError(t, s.do(t, http.MethodGet, "/sales/sale_nope/policy", "", ""), 404, "not_found")
	})
	t.Run("TitleImageAndOpeningTime", func(t *testing.T) {
		t.Parallel()
		opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		body := fmt.Sprintf(`{"sku":"sku_t","initialStock":5,"admission":"waiting_room","opensAt":%q,`+
			`"title":"Trail runner — édition limitée","imageUrl":"https://img.example/shoe.png?w=600"}`, opens.Format(time.RFC3339))
		r := s.do(t, http.MethodPost, "/admin/sales", adminAuth, body)
		sale := requireSale(t, r, 201)
		var created struct {
			Title    string  `json:"title"`
			ImageURL *string `json:"imageUrl"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &created))
		require.Equal(t, "Trail runner — édition limitée", created.Title)
		require.Equal(t, "https://img.example/shoe.png?w=600", *created.ImageURL)

		var p api.Policy
		r = s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/policy", "", "")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		require.NoError(t, json.Unmarshal(r.Body, &p))
		require.Equal(t, "Trail runner — édition limitée", p.Title)
		require.Equal(t, "https://img.example/shoe.png?w=600", *p.ImageURL)
		require.Equal(t, opens.Format(time.RFC3339), *p.OpensAt)

		// Without a title the SKU is shown; without an image, null.
		plain := s.createSale(t, `{"sku":"sku_plain","initialStock":5,"admission":"waiting_room"}`)
		r = s.do(t, http.MethodGet, "/sales/"+plain.SaleID+"/policy", "", "")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		p = api.Policy{}
		require.NoError(t, json.Unmarshal(r.Body, &p))
		require.Equal(t, "sku_plain", p.Title)
		require.Nil(t, p.ImageURL)
		require.Nil(t, p.OpensAt, "opened by the store, whenever it does")
		r = s.do(t, http.MethodGet, "/admin/sales/"+plain.SaleID, adminAuth, "")
		require.Contains(t, string(r.Body), `"title":"sku_plain","imageUrl":null`)
	})
	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		direct := s.createSale(t, `{"sku":"sku_d","initialStock":5}`)
		requireError(t, s.do(t, http.MethodGet, "/sales/"+direct.SaleID+"/ticket", customer(t, "dan"), ""), 409, "no_waiting_room")
		requireError(t, s.do(t, http.MethodGet, "/sales/sale_nope/ticket", customer(t, "dan"), ""), 404, "not_found")
		closed := s.createSale(t, `{"sku":"sku_c","initialStock":5,"admission":"waiting_room"}`)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+closed.SaleID+"/close", adminAuth, ""), 200)
		require.Eventually(t, func() bool {
			r := s.do(t, http.MethodGet, "/sales/"+closed.SaleID+"/ticket", customer(t, "dan"), "")
			return r.Status == 409
		}, 5*time.Second, 20*time.Millisecond)
		requireError(t, s.do(t, http.MethodGet, "/sales/"+closed.SaleID+"/ticket", customer(t, "dan"), ""), 409, "sale_not_open")
	})
	t.Run("RateLimited", func(t *testing.T) {
		t.Parallel()
		greedy := customer(t, "greedy")
		// Before the open of a randomized_at_open room asking again gives
		// the same ticket, and nothing is limited.
		// (A sale of its own: alice is alone in scheduled's crowd.)
		randomized := s.createSale(t, `{"sku":"sku_r","initialStock":5,"admission":"waiting_room","opensAt":"`+later+`"}`)
		first := s.ticket(t, randomized.SaleID, greedy, "")
		for range 10 {
			require.Equal(t, first.Token, s.ticket(t, randomized.SaleID, greedy, "").Token)
		}
		// In line by arrival every ask is a new place at the back: limited.
		byArrival := s.createSale(t, `{"sku":"sku_a","initialStock":5,"admission":"waiting_room","fairness":"arrival_order","opensAt":"`+later+`"}`)
		var last ticketJSON
		for range 5 {
			last = s.ticket(t, byArrival.SaleID, greedy, "")
		}
		r := s.do(t, http.MethodGet, "/sales/"+byArrival.SaleID+"/ticket", greedy, "")
		requireError(t, r, 429, "rate_limited")
		retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, retry)
		// Presenting the ticket held costs nothing and is not limited.
		require.Equal(t, last.Token, s.ticket(t, byArrival.SaleID, greedy, last.Token).Token)
	})
	t.Run("AccountTooNew", func(t *testing.T) {
		t.Parallel()
		sale := s.createSale(t, `{"sku":"sku_age","initialStock":5,"admission":"waiting_room","minAccountAgeSeconds":3600}`)
		young, err := auth.Mint(jwtSecret, "young", time.Hour, time.Now().Add(-time.Minute))
		require.NoError(t, err)
		requireError(t, s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/ticket", bearer(young), ""), 403, "account_too_new")
		requireError(t, s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/ticket", customer(t, "unknown-age"), ""), 403, "account_too_new")
		old, err := auth.Mint(jwtSecret, "old", time.Hour, time.Now().Add(-2*time.Hour))
		require.NoError(t, err)
		s.ticket(t, sale.SaleID, bearer(old), "")
	})
	t.Run("ChallengeThenAdmitted", func(t *testing.T) {
		t.Parallel()
		sale := s.createSale(t, `{"sku":"sku_pow","initialStock":5,"admission":"waiting_room","challengeBits":8}`)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/open", adminAuth, ""), 200)
		erin := customer(t, "erin")
		tk := s.ticket(t, sale.SaleID, erin, "")
		require.NotNil(t, tk.Challenge)
		require.Equal(t, 8, tk.Challenge.Bits)
		var st statusJSON
		var keys []string
		require.Eventually(t, func() bool {
			st, keys = s.status(t, sale.SaleID, erin, tk.Token, "")
			return st.State != "waiting"
		}, 10*time.Second, 20*time.Millisecond)
		require.Equal(t, "challenge_required", st.State)
		require.Equal(t, []string{"challenge", "state"}, keys)
		require.Equal(t, tk.Challenge.Nonce, st.Challenge.Nonce)
		st, keys = s.status(t, sale.SaleID, erin, tk.Token, roomtoken.Solve(st.Challenge.Nonce, st.Challenge.Bits))
		require.Equal(t, "admitted", st.State)
		require.Equal(t, []string{"admissionToken", "expiresIn", "state"}, keys)
		require.Equal(t, 120, st.ExpiresIn)
		require.NotEmpty(t, st.AdmissionToken)
	})
	t.Run("PausedWaits", func(t *testing.T) {
		t.Parallel()
		sale := s.createSale(t, `{"sku":"sku_p","initialStock":5,"admission":"waiting_room"}`)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/open", adminAuth, ""), 200)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/pause", adminAuth, ""), 200)
		frank := customer(t, "frank")
		tk := s.ticket(t, sale.SaleID, frank, "")
		require.Eventually(t, func() bool {
			st, keys := s.status(t, sale.SaleID, frank, tk.Token, "")
			// (positionRange too when the ticket was placed by the draw: an
			// instance that had not heard of the open yet.)
			return st.State == "waiting" && st.Paused && len(keys) >= 5
		}, 5*time.Second, 20*time.Millisecond)
	})
}

// TestQueueControls: an operator holds a room's queue (nobody is admitted,
// though the watermark reached them), tells everyone waiting why, and
// releases it; each is audited.
func TestQueueControls(t *testing.T) {
	t.Parallel()
	s := newWaitroomServer(t, waitroom.Options{})
	ctx := context.Background()
	sale := s.createSale(t, `{"sku":"sku_q","initialStock":5,"admission":"waiting_room"}`)
	requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/open", adminAuth, ""), 200)
	time.Sleep(300 * time.Millisecond) // past the quarter second of draws after the open

	r := s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/hold", adminAuth, `{"operator":"ops-ann","reason":"payment provider down"}`)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.JSONEq(t, `{"saleId":"`+sale.SaleID+`","held":true}`, string(r.Body))
	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/message", adminAuth, `{"operator":"ops-ann","message":"Checkout is paused for a few minutes; you keep your place."}`)
	require.Equal(t, 200, r.Status, "%s", r.Body)

	gina := customer(t, "gina")
	tk := s.ticket(t, sale.SaleID, gina, "")
	// The watermark passes gina's rank, but the queue is held.
	_, err := s.pool.Exec(ctx, `UPDATE waiting_rooms SET admitted_through = 1000 WHERE sale_id = $1`, sale.SaleID)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // the cache has read the watermark
	st, _ := s.status(t, sale.SaleID, gina, tk.Token, "")
	require.Equal(t, "waiting", st.State, "nobody is admitted while the queue is held")
	require.True(t, st.Held)
	require.Equal(t, "Checkout is paused for a few minutes; you keep your place.", st.Message)

	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/release", adminAuth, `{"operator":"ops-ann"}`)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	st, _ = s.status(t, sale.SaleID, gina, tk.Token, "")
	require.Equal(t, "admitted", st.State)
	require.Equal(t, "Checkout is paused for a few minutes; you keep your place.", st.Message, "the message stays until cleared")
	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/message", adminAuth, `{"message":""}`)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	st, keys := s.status(t, sale.SaleID, gina, tk.Token, "")
	require.NotContains(t, keys, "message")
	require.Equal(t, "admitted", st.State)

	rows, err := s.pool.Query(ctx, `SELECT action, operator, detail FROM operator_actions WHERE sale_id = $1 ORDER BY action_id`, sale.SaleID)
	require.NoError(t, err)
	var audit []string
	for rows.Next() {
		var action, operator, detail string
		require.NoError(t, rows.Scan(&action, &operator, &detail))
		audit = append(audit, action+" "+operator+" "+detail)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		"open admin now open", // the sale's own open, audited as every state change
		"hold_queue ops-ann payment provider down",
		"broadcast ops-ann Checkout is paused for a few minutes; you keep your place.",
		"release_queue ops-ann ",
		"broadcast " + flashline.DefaultOperator + " ",
	}, audit)

	t.Run("Refusals", func(t *testing.T) {
		direct := s.createSale(t, `{"sku":"sku_qd","initialStock":5}`)
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/"+direct.SaleID+"/queue/hold", adminAuth, ""), 409, "no_waiting_room")
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/sale_01M8RNF62CEN5DAP9ZE94JJ3CE/queue/hold", adminAuth, ""), 404, "not_found")
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/hold", customer(t, "gina"), ""), 403, "forbidden")
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/message", adminAuth, `{}`), 400, "invalid_request")
		long := strings.Repeat("x", waitroom.MaxBroadcastLen+1)
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/message", adminAuth, `{"message":"`+long+`"}`), 400, "invalid_request")
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/message", adminAuth, `{"message":"bell\u0007"}`), 400, "invalid_request")
	})
}

// TestSoldOutStatus: a sold-out room says whether units can come back. While
// a hold is pending, sold out for now (queueIsFull false, ask again after
// pollAfterMs); once it is confirmed, for good (queueIsFull true, nothing
// else); a closed sale's line is over too.
func TestSoldOutStatus(t *testing.T) {
	t.Parallel()
	s := newWaitroomServer(t, waitroom.Options{})
	keys := roomtoken.DeriveKeyring(jwtSecret)
	sale := s.createSale(t, `{"sku":"sku_so","initialStock":1,"admission":"waiting_room","confirmation":"customer"}`)
	requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/open", adminAuth, ""), 200)
	time.Sleep(300 * time.Millisecond) // past the quarter second of draws after the open
	hana, ivan := customer(t, "hana"), customer(t, "ivan")
	tk := s.ticket(t, sale.SaleID, ivan, "")

	admission := keys.SignAdmission(roomtoken.Admission{ID: "adm-hana", SaleID: sale.SaleID, CustomerID: "hana", ExpiresAt: time.Now().Add(time.Minute)})
	held := requireReservation(t, s.do(t, http.MethodPost, "/sales/"+sale.SaleID+"/reservations", hana, `{"quantity":1}`,
		"Idempotency-Key", "k1", "X-Admission-Token", admission), http.StatusCreated)

	var st statusJSON
	var keysSeen []string
	require.Eventually(t, func() bool {
		st, keysSeen = s.status(t, sale.SaleID, ivan, tk.Token, "")
		return st.State == "sold_out"
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"pollAfterMs", "queueIsFull", "state"}, keysSeen, "sold out for now")
	require.InDelta(t, 5000, st.PollAfterMs, 1500)

	requireOrder(t, s.do(t, http.MethodPost, "/reservations/"+held.ReservationID+"/confirm", hana, ""), held.ReservationID)
	var full struct {
		QueueIsFull *bool `json:"queueIsFull"`
	}
	require.Eventually(t, func() bool { // the cache reads it again within a second or so
		r := s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/status?token="+url.QueryEscape(tk.Token), ivan, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		full.QueueIsFull = nil
		require.NoError(t, json.Unmarshal(r.Body, &full))
		return full.QueueIsFull != nil && *full.QueueIsFull
	}, 5*time.Second, 50*time.Millisecond)
	_, keysSeen = s.status(t, sale.SaleID, ivan, tk.Token, "")
	require.Equal(t, []string{"queueIsFull", "state"}, keysSeen, "sold out for good")

	t.Run("Closed", func(t *testing.T) {
		open := s.createSale(t, `{"sku":"sku_cl","initialStock":5,"admission":"waiting_room"}`)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+open.SaleID+"/open", adminAuth, ""), 200)
		tk := s.ticket(t, open.SaleID, ivan, "")
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+open.SaleID+"/close", adminAuth, ""), 200)
		require.Eventually(t, func() bool {
			st, keys := s.status(t, open.SaleID, ivan, tk.Token, "")
			return st.State == "sold_out" && slices.Equal(keys, []string{"queueIsFull", "state"})
		}, 5*time.Second, 20*time.Millisecond)
	})
}

// TestStatusStream: a waiting client's stream sends where its ticket stands
// as server-sent events (the status route's JSON), the sell-out as soon as
// the instance knows of it (the cache's watch), not when a poll would have
// come round, and ends once the sale is sold out for good.
func TestStatusStream(t *testing.T) {
	t.Parallel()
	s := newWaitroomServer(t, waitroom.Options{})
	keys := roomtoken.DeriveKeyring(jwtSecret)
	sale := s.createSale(t, `{"sku":"sku_stream","initialStock":1,"admission":"waiting_room","confirmation":"customer"}`)
	requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/open", adminAuth, ""), 200)
	// Held: nobody is let in, so ivan waits (and would poll every 5 s).
	r := s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/queue/hold", adminAuth, `{"operator":"ops","reason":"test"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	hana, ivan := customer(t, "hana"), customer(t, "ivan")
	tk := s.ticket(t, sale.SaleID, ivan, "")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
		s.api.BaseURL+"/sales/"+sale.SaleID+"/status/stream?token="+url.QueryEscape(tk.Token), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", ivan)
	resp, err := s.api.HTTP.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := make(chan statusJSON, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue // "event: status", blank lines, ": comments"
			}
			var st statusJSON
			if json.Unmarshal([]byte(data), &st) == nil {
				events <- st
			}
		}
	}()
	next := func() statusJSON {
		t.Helper()
		select {
		case st, ok := <-events:
			require.True(t, ok, "the stream ended")
			return st
		case <-time.After(30 * time.Second):
			t.Fatal("no event in 30 s")
			return statusJSON{}
		}
	}
	first := next()
	require.Equal(t, "waiting", first.State)
	require.True(t, first.Held)

	// hana takes the only unit; ivan's stream hears "sold out" once the
	// instance does.
	admission := keys.SignAdmission(roomtoken.Admission{ID: "adm-hana", SaleID: sale.SaleID, CustomerID: "hana", ExpiresAt: time.Now().Add(time.Minute)})
	held := requireReservation(t, s.do(t, http.MethodPost, "/sales/"+sale.SaleID+"/reservations", hana, `{"quantity":1}`,
		"Idempotency-Key", "k1", "X-Admission-Token", admission), http.StatusCreated)
	reserved := time.Now()
	st := next()
	for st.State == "waiting" {
		st = next()
	}
	t.Logf("sold out heard on the stream %v after the reservation", time.Since(reserved).Round(time.Millisecond))
	require.Equal(t, "sold_out", st.State)

	// Paid for: sold out for good, and the stream is over.
	requireOrder(t, s.do(t, http.MethodPost, "/reservations/"+held.ReservationID+"/confirm", hana, ""), held.ReservationID)
	for {
		st, ok := <-events
		if !ok {
			break
		}
		require.Equal(t, "sold_out", st.State)
	}

	t.Run("BadTicket", func(t *testing.T) {
		r := s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/status/stream?token=nope", ivan, "")
		requireError(t, r, http.StatusForbidden, "admission_invalid")
	})
}

// TestStreamsPerCustomer: a status stream holds one of its customer's
// requests in flight only until its first answer, and one customer keeps
// at most two streams for a sale open: a third ends the oldest, told to
// reconnect in five seconds. Before, a stream held its request in flight
// until the server saw it closed, so a page reloaded a few times on a busy
// machine, or left in a browser that kept its connection, was answered 429
// until then (TestPageLanguages).
func TestStreamsPerCustomer(t *testing.T) {
	t.Parallel()
	s := newWaitroomServerWith(t, func(d *handlers.Deps) { d.CustomerInFlight = 1 })
	sale := s.createSale(t, `{"sku":"sku_tabs","initialStock":1,"admission":"waiting_room"}`).SaleID
	requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale+"/open", adminAuth, ""), 200)
	// Held: nobody is let in, and every stream stays open.
	r := s.do(t, http.MethodPost, "/admin/sales/"+sale+"/queue/hold", adminAuth, `{"operator":"ops","reason":"test"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	ivan := customer(t, "ivan")
	tk := s.ticket(t, sale, ivan, "")

	// open starts a stream of ivan's and returns its lines, once its first
	// answer has come.
	open := func() <-chan string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
			s.api.BaseURL+"/sales/"+sale+"/status/stream?token="+url.QueryEscape(tk.Token), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", ivan)
		resp, err := s.api.HTTP.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("a stream answered %d: %s", resp.StatusCode, body)
		}
		lines := make(chan string, 64)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		for line := range lines {
			if strings.HasPrefix(line, "data: ") {
				return lines
			}
		}
		t.Fatal("the stream ended before its first answer")
		return nil
	}
	// Each stream, once answered, leaves ivan's one request free: a poll
	// and a new stream are served beside it.
	first := open()
	requireStatus := func() {
		t.Helper()
		r := s.do(t, http.MethodGet, "/sales/"+sale+"/status?token="+url.QueryEscape(tk.Token), ivan, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	requireStatus()
	second := open()
	requireStatus()
	third := open()
	// The third ended the first, which says when to come back.
	var last []string
	for line := range first {
		last = append(last, line)
	}
	require.Equal(t, []string{"event: reconnect", "retry: 5000", ""}, last[max(0, len(last)-3):], "the first stream's last lines")
	// The two newest stay open.
	for _, lines := range []<-chan string{second, third} {
		for more := true; more; {
			select {
			case line, ok := <-lines:
				require.True(t, ok && !strings.HasPrefix(line, "event: reconnect"), "a newer stream ended: %q", line)
			default:
				more = false
			}
		}
	}
}
