package handlers_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// lotteryBody is a lottery sale's create body: registration open now, the
// draw in an hour (tests move it with dueLottery).
func lotteryBody(stock int, extra string) string {
	now := time.Now().UTC()
	return fmt.Sprintf(`{"sku":"L","initialStock":%d,"confirmation":"customer","admission":"lottery",
		"registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":600%s}`,
		stock, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339),
		now.Add(time.Hour).Format(time.RFC3339), extra)
}

// dueLottery closes a lottery's registration and makes its draw due, now.
func (s *server) dueLottery(t *testing.T, saleID string) {
	t.Helper()
	_, err := s.pool.Exec(t.Context(), `UPDATE lotteries SET registration_closes_at = now(), draw_at = now() WHERE sale_id = $1`, saleID)
	require.NoError(t, err)
	_, err = s.pool.Exec(t.Context(), `UPDATE sales SET opens_at = now() WHERE sale_id = $1`, saleID)
	require.NoError(t, err)
}

type registrationJSON struct {
	RegistrationID       string  `json:"registrationId"`
	State                string  `json:"state"`
	DrawRank             int     `json:"drawRank"`
	AdmissionToken       string  `json:"admissionToken"`
	PurchaseWindowEndsAt *string `json:"purchaseWindowEndsAt"`
	RegistrationOpen     *bool   `json:"registrationOpen"`
	Registrant           string  `json:"registrant"`
	RegistrantLeaf       string  `json:"registrantLeaf"`
}

func decodeRegistration(t *testing.T, r reply, status int) registrationJSON {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	var reg registrationJSON
	require.NoError(t, json.Unmarshal(r.Body, &reg))
	return reg
}

func (s *server) register(t *testing.T, saleID, authorization, instrument string) reply {
	t.Helper()
	return s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", authorization, fmt.Sprintf(`{"paymentInstrument":%q}`, instrument))
}

func (s *server) registration(t *testing.T, saleID, authorization string) registrationJSON {
	t.Helper()
	return decodeRegistration(t, s.do(t, http.MethodGet, "/sales/"+saleID+"/registration", authorization, ""), http.StatusOK)
}

func TestCreateLotterySale(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	created := s.do(t, http.MethodPost, "/admin/sales", adminAuth, lotteryBody(3, `,"waitlist":true`))
	sale := requireSale(t, created, http.StatusCreated)
	require.Equal(t, "lottery", sale.Admission)
	require.Equal(t, "scheduled", sale.State)
	var view struct {
		Lottery api.Lottery `json:"lottery"`
	}
	require.NoError(t, json.Unmarshal(created.Body, &view))
	require.True(t, view.Lottery.Waitlist)
	require.Equal(t, 600, view.Lottery.PurchaseWindowSeconds)
	require.Equal(t, *sale.OpensAt, view.Lottery.DrawAt[:len(*sale.OpensAt)])

	now := time.Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	bad := map[string]string{
		"MissingDrawAt":         fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"purchaseWindowSeconds":60}`, at(0), at(time.Hour)),
		"ClosesBeforeOpens":     fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":60}`, at(time.Hour), at(0), at(2*time.Hour)),
		"DrawBeforeClose":       fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":60}`, at(0), at(2*time.Hour), at(time.Hour)),
		"NoWindow":              fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q}`, at(0), at(time.Hour), at(time.Hour)),
		"WindowTooLong":         fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":604801}`, at(0), at(time.Hour), at(time.Hour)),
		"WaitlistOnDirectSale":  `{"sku":"L","initialStock":1,"confirmation":"customer","waitlist":true}`,
		"DrawAtOnWaitingRoom":   fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"waiting_room","opensAt":%q,"drawAt":%q}`, at(time.Hour), at(time.Hour)),
		"LotteryWithOpensAt":    fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery","opensAt":%q,"registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":60}`, at(3*time.Hour), at(0), at(time.Hour), at(time.Hour)),
		"LotteryTwoPerCustomer": fmt.Sprintf(`{"sku":"L","initialStock":1,"perCustomerLimit":2,"confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":60}`, at(0), at(time.Hour), at(time.Hour)),
		"LotteryWithGate":       fmt.Sprintf(`{"sku":"L","initialStock":1,"gate":"redis","confirmation":"customer","admission":"lottery","registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":60}`, at(0), at(time.Hour), at(time.Hour)),
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			requireError(t, s.do(t, http.MethodPost, "/admin/sales", adminAuth, body), http.StatusBadRequest, "invalid_request")
		})
	}
}

func TestLotteryRegistration(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	saleID := s.createSale(t, lotteryBody(1, "")).SaleID

	t.Run("Unregistered", func(t *testing.T) {
		reg := s.registration(t, saleID, customer(t, "cust_nobody"))
		require.Equal(t, "unregistered", reg.State)
		require.NotNil(t, reg.RegistrationOpen)
		require.True(t, *reg.RegistrationOpen)
	})
	t.Run("RepeatAnswersTheSameRegistration", func(t *testing.T) {
		auth := customerWith(t, "cust_a", "card-a0")
		// The same customer at once, many times, the body's instrument
		// (ignored) written two ways.
		var wg sync.WaitGroup
		ids := make([]string, 16)
		for i := range ids {
			wg.Go(func() {
				r, err := s.send(t.Context(), http.MethodPost, "/sales/"+saleID+"/registrations", auth,
					[]string{`{"paymentInstrument":"card-a0"}`, `{"paymentInstrument":"CARD-A0 "}`}[i%2])
				if err == nil && r.Status == http.StatusCreated {
					var reg registrationJSON
					if json.Unmarshal(r.Body, &reg) == nil && reg.State == "registered" {
						ids[i] = reg.RegistrationID
					}
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			require.Equal(t, ids[0], id)
		}
		require.NotEmpty(t, ids[0])
		require.Equal(t, ids[0], s.registration(t, saleID, auth).RegistrationID)
	})
	t.Run("InstrumentOfAnotherAccount", func(t *testing.T) {
		// The token's claim, normalised: one instrument.
		requireError(t, s.register(t, saleID, customerWith(t, "cust_b", " CARD-A0"), ""), http.StatusConflict, "instrument_already_registered")
	})
	t.Run("BodyInstrumentIsIgnored", func(t *testing.T) {
		// The shopper's word counts for nothing: neither to lock another
		// account out with its instrument, nor to be required.
		decodeRegistration(t, s.register(t, saleID, customer(t, "cust_c"), "card-a0"), http.StatusCreated)
		decodeRegistration(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", customer(t, "cust_d"), `{}`), http.StatusCreated)
	})
	t.Run("NotALottery", func(t *testing.T) {
		direct := s.createSale(t, `{"sku":"D","initialStock":1,"confirmation":"customer"}`).SaleID
		requireError(t, s.register(t, direct, customer(t, "cust_b"), "card-b"), http.StatusConflict, "no_lottery")
	})
	t.Run("Closed", func(t *testing.T) {
		now := time.Now().UTC()
		later := s.createSale(t, fmt.Sprintf(`{"sku":"L","initialStock":1,"confirmation":"customer","admission":"lottery",
			"registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":60}`,
			now.Add(time.Hour).Format(time.RFC3339), now.Add(2*time.Hour).Format(time.RFC3339), now.Add(2*time.Hour).Format(time.RFC3339))).SaleID
		requireError(t, s.register(t, later, customer(t, "cust_b"), "card-b"), http.StatusConflict, "registration_closed")
	})
	t.Run("AdminCounts", func(t *testing.T) {
		var view struct {
			Lottery api.Lottery `json:"lottery"`
		}
		require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/admin/sales/"+saleID, adminAuth, "").Body, &view))
		require.Equal(t, 3, view.Lottery.Registrations.Total)
		require.Equal(t, 3, view.Lottery.Registrations.Registered)
	})
}

func TestLotteryRegistrationRules(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	saleID := s.createSale(t, lotteryBody(1, `,"challengeBits":8,"minAccountAgeSeconds":3600`)).SaleID
	old := func(id string) string {
		tok, err := authMintCreated(id, time.Now().Add(-2*time.Hour))
		require.NoError(t, err)
		return bearer(tok)
	}
	requireError(t, s.register(t, saleID, customer(t, "cust_new"), "card-1"), http.StatusForbidden, "account_too_new")
	requireError(t, s.register(t, saleID, old("cust_old"), "card-1"), http.StatusForbidden, "challenge_failed")
	var unreg struct {
		Challenge struct {
			Nonce string `json:"nonce"`
			Bits  int    `json:"bits"`
		} `json:"challenge"`
	}
	require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/registration", old("cust_old"), "").Body, &unreg))
	require.Equal(t, 8, unreg.Challenge.Bits)
	solution := roomtoken.Solve(unreg.Challenge.Nonce, unreg.Challenge.Bits)
	r := s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", old("cust_old"), fmt.Sprintf(`{"paymentInstrument":"card-1","solution":%q}`, solution))
	require.Equal(t, "registered", decodeRegistration(t, r, http.StatusCreated).State)
}

// TestLotteryDrawAndBuy: the draw, run twice at once, happens once; winners
// buy with their admission token, once; losers cannot; the policy reveals
// the seed, from which the order is recomputed.
func TestLotteryDrawAndBuy(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	const stock, registrants = 3, 10
	saleID := s.createSale(t, lotteryBody(stock, `,"title":"Lucky sneaker","imageUrl":"https://img.example/l.png"`)).SaleID
	auths := make(map[string]string)
	for i := range registrants {
		id := fmt.Sprintf("cust_%02d", i)
		auths[id] = customer(t, id)
		require.Equal(t, http.StatusCreated, s.register(t, saleID, auths[id], "card-"+id).Status)
	}
	var policy api.LotteryPolicy
	require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/policy", "", "").Body, &policy))
	require.Nil(t, policy.DrawSeed, "the seed is secret before the draw")
	require.Equal(t, "Lucky sneaker", policy.Title)
	require.Equal(t, "https://img.example/l.png", *policy.ImageURL)
	require.Len(t, policy.DrawCommitment, 64)

	// Before the draw nobody can buy.
	requireError(t, s.reserve(t, saleID, auths["cust_00"], "k0", `{}`), http.StatusConflict, "sale_not_open")
	var tr api.DrawTranscript
	r := s.do(t, http.MethodGet, "/sales/"+saleID+"/draw", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	require.Equal(t, "registering", tr.Status)
	require.Empty(t, tr.Registrants, "nobody listed before the close")
	require.Nil(t, tr.Beacon)
	require.Contains(t, tr.Note, "NO BEACON")
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	s.dueLottery(t, saleID)
	var wg sync.WaitGroup
	drew := make([]bool, 2)
	for i := range drew {
		wg.Go(func() {
			r, err := store.DrawLottery(t.Context(), saleID, nil)
			if err == nil {
				drew[i] = r.Drew
			}
		})
	}
	wg.Wait()
	require.NotEqual(t, drew[0], drew[1], "exactly one draw: %v", drew)

	// The transcript: public, cacheable once drawn, and it checks out.
	r = s.do(t, http.MethodGet, "/sales/"+saleID+"/draw", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "public, max-age=3600", r.Header.Get("Cache-Control"))
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	require.Equal(t, "drawn", tr.Status)
	require.Len(t, tr.Registrants, registrants)
	require.Len(t, tr.Winners, stock)
	dt, err := tr.Domain()
	require.NoError(t, err)
	for _, step := range flashline.VerifyDrawTranscript(dt, flashline.DrawPins{}) {
		require.True(t, step.OK, "%s: %s", step.Name, step.Detail)
	}
	// Each registration answer carries the registrant's own hashed id and
	// leaf, found in the transcript at the registration's rank.
	reg0 := s.registration(t, saleID, auths["cust_00"])
	require.Equal(t, flashline.RegistrantOf(saleID, "cust_00").String(), reg0.Registrant)
	leaf := flashline.RegistrantLeaf(flashline.RegistrantOf(saleID, "cust_00"))
	require.Equal(t, hex.EncodeToString(leaf[:]), reg0.RegistrantLeaf)
	require.Equal(t, reg0.Registrant, tr.Registrants[reg0.DrawRank-1].Registrant)

	require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/policy", "", "").Body, &policy))
	require.NotNil(t, policy.DrawSeed)
	seed, err := hex.DecodeString(*policy.DrawSeed)
	require.NoError(t, err)
	require.Equal(t, policy.DrawCommitment, flashline.DrawCommitment(seed))
	customers := make([]string, 0, registrants)
	for id := range auths {
		customers = append(customers, id)
	}
	rs := make([]flashline.Registrant, len(customers))
	for i, c := range customers {
		rs[i] = flashline.RegistrantOf(saleID, c)
	}
	order := flashline.LotteryOrderV2(saleID, flashline.LotteryFinalSeed(saleID, flashline.RegistrantsRoot(rs), nil, seed), customers)

	var winners []string
	for rank, id := range order {
		reg := s.registration(t, saleID, auths[id])
		require.Equal(t, rank+1, reg.DrawRank, id)
		if rank < stock {
			require.Equal(t, "won", reg.State)
			require.NotEmpty(t, reg.AdmissionToken)
			winners = append(winners, id)
			continue
		}
		require.Equal(t, "lost", reg.State)
		require.Empty(t, reg.AdmissionToken)
		requireError(t, s.reserve(t, saleID, auths[id], "k-"+id, `{}`), http.StatusForbidden, "admission_required")
	}
	// A loser with a winner's token is refused; the winner buys once.
	winnerTok := s.registration(t, saleID, auths[winners[0]]).AdmissionToken
	loser := order[stock]
	requireError(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[loser], `{}`,
		"Idempotency-Key", "steal", "X-Admission-Token", winnerTok), http.StatusForbidden, "admission_invalid")
	for _, id := range winners {
		tok := s.registration(t, saleID, auths[id]).AdmissionToken
		res := requireCreated(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[id], `{}`,
			"Idempotency-Key", "buy-"+id, "X-Admission-Token", tok), saleID, 1)
		s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/cancel", auths[id], "")
		// Single use: the same token cannot buy again.
		requireError(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[id], `{}`,
			"Idempotency-Key", "again-"+id, "X-Admission-Token", tok), http.StatusForbidden, "admission_invalid")
	}
	var ntf int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM lottery_notifications WHERE sale_id = $1`, saleID).Scan(&ntf))
	require.Equal(t, registrants, ntf, "one notification per registration")
}

// TestLotteryWaitlist: a winner whose window ends without a purchase passes
// the unit to the next in draw order, once, however many run the expiry at
// once, until the list ends.
func TestLotteryWaitlist(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	saleID := s.createSale(t, lotteryBody(1, `,"waitlist":true`)).SaleID
	auths := make(map[string]string)
	for i := range 3 {
		id := fmt.Sprintf("cust_%d", i)
		auths[id] = customer(t, id)
		require.Equal(t, http.StatusCreated, s.register(t, saleID, auths[id], "card-"+id).Status)
	}
	s.dueLottery(t, saleID)
	_, err := store.DrawLottery(t.Context(), saleID, nil)
	require.NoError(t, err)
	byRank := make([]string, 4)
	for id, a := range auths {
		reg := s.registration(t, saleID, a)
		byRank[reg.DrawRank] = id
	}
	require.Equal(t, "won", s.registration(t, saleID, auths[byRank[1]]).State)
	require.Equal(t, "waitlisted", s.registration(t, saleID, auths[byRank[2]]).State)

	endWindows := func() {
		_, err := s.pool.Exec(t.Context(), `UPDATE lottery_registrations SET purchase_window_ends_at = now() - interval '1 second' WHERE sale_id = $1 AND state = 'won'`, saleID)
		require.NoError(t, err)
	}
	expireTwiceAtOnce := func() {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { _, _ = store.ExpireWindows(t.Context(), 0) })
		}
		wg.Wait()
	}
	endWindows()
	expireTwiceAtOnce()
	require.Equal(t, "expired", s.registration(t, saleID, auths[byRank[1]]).State)
	second := s.registration(t, saleID, auths[byRank[2]])
	require.Equal(t, "won", second.State)
	require.NotEmpty(t, second.AdmissionToken)
	require.Equal(t, "waitlisted", s.registration(t, saleID, auths[byRank[3]]).State)
	// The expired winner's token no longer buys; the promoted one's does.
	requireCreated(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[byRank[2]], `{}`,
		"Idempotency-Key", "buy", "X-Admission-Token", second.AdmissionToken), saleID, 1)
	// A winner who bought keeps the unit when the window ends.
	endWindows()
	expireTwiceAtOnce()
	require.Equal(t, "won", s.registration(t, saleID, auths[byRank[2]]).State)
	require.Equal(t, "waitlisted", s.registration(t, saleID, auths[byRank[3]]).State)

	rows, err := s.pool.Query(t.Context(), `SELECT kind, count(*) FROM lottery_notifications WHERE sale_id = $1 GROUP BY kind`, saleID)
	require.NoError(t, err)
	kinds := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		kinds[k] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"won": 1, "waitlisted": 2, "window_expired": 1, "promoted": 1}, kinds)
}

func authMintCreated(id string, created time.Time) (string, error) {
	return auth.Mint(jwtSecret, id, time.Hour, created)
}
