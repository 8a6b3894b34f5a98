package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/postgres"
)

// lotteryVariantsBody is a lottery sale with variants S (2 units), M (1)
// and L (3), in that order; registration open now.
func lotteryVariantsBody(extra string) string {
	now := time.Now().UTC()
	return fmt.Sprintf(`{"sku":"LV","confirmation":"customer","admission":"lottery",
		"variants":[{"sku":"S","title":"Small","stock":2},{"sku":"M","stock":1},{"sku":"L","stock":3}],
		"registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":600%s}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339),
		now.Add(time.Hour).Format(time.RFC3339), extra)
}

// wantedAwards is the award rule written out again, independently of
// flashline.LotteryAwards: in rank order, the variant named while a unit
// of it is left; any: the first of S, M, L with a unit left.
func wantedAwards(choices []string) []string {
	left := map[string]int{"S": 2, "M": 1, "L": 3}
	out := make([]string, len(choices))
	for i, c := range choices {
		if c == "any" {
			for _, v := range []string{"S", "M", "L"} {
				if left[v] > 0 {
					c = v
					break
				}
			}
		}
		if left[c] > 0 {
			left[c]--
			out[i] = c
		}
	}
	return out
}

func verifies(t *testing.T, tr api.DrawTranscript) (bool, string) {
	t.Helper()
	dt, err := tr.Domain()
	if err != nil {
		return false, "document: " + err.Error()
	}
	for _, step := range flashline.VerifyDrawTranscript(dt, flashline.DrawPins{}) {
		if !step.OK {
			return false, step.Name + ": " + step.Detail
		}
	}
	return true, ""
}

// TestLotteryVariants: registrations name a variant or any; the draw awards
// each variant exactly its units in draw order; the transcript shows and
// proves each award (and fails when one is altered); a winner reserves the
// variant won and no other.
func TestLotteryVariants(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})

	// A variant named "any" would be ambiguous in a lottery.
	requireError(t, s.do(t, http.MethodPost, "/admin/sales", adminAuth,
		strings.Replace(lotteryVariantsBody(""), `"sku":"M"`, `"sku":"any"`, 1)), http.StatusBadRequest, "invalid_request")

	saleID := s.createSale(t, lotteryVariantsBody("")).SaleID
	var policy api.LotteryPolicy
	require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/policy", "", "").Body, &policy))
	require.Equal(t, []api.LotteryPolicyVariant{{SKU: "S", Title: "Small", Units: 2}, {SKU: "M", Title: "M", Units: 1}, {SKU: "L", Title: "L", Units: 3}}, policy.Variants)
	require.Equal(t, 6, policy.Units)
	require.Contains(t, policy.DrawAlgorithm, "flashline/lottery/draw/v3")
	var before api.DrawTranscript
	require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/draw", "", "").Body, &before))
	require.Equal(t, "registering", before.Status)
	require.Equal(t, api.DrawFormulaV3, before.Formula, "the formula from the start")
	require.Len(t, before.Variants, 3)

	// 16 registrants for 6 units: four name each variant, four any.
	auths, named := map[string]string{}, map[string]string{}
	choices := []string{"S", "M", "L", "any"}
	for i := range 16 {
		id := fmt.Sprintf("cust_v%02d", i)
		auths[id], named[id] = customer(t, id), choices[i%4]
		body := fmt.Sprintf(`{"variant":%q}`, named[id])
		if named[id] == "any" && i%8 == 3 {
			body = `{}` // left out: any
		}
		reg := decodeRegistration(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", auths[id], body), http.StatusCreated)
		var full api.Registration
		require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/registration", auths[id], "").Body, &full))
		require.Equal(t, named[id], full.Variant)
		choice := named[id]
		if choice == "any" {
			choice = ""
		}
		leaf := flashline.RegistrantChoiceLeaf(flashline.RegistrantOf(saleID, id), choice)
		require.Equal(t, fmt.Sprintf("%x", leaf), reg.RegistrantLeaf, "the leaf commits the choice")
	}
	requireError(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", customer(t, "cust_vx"), `{"variant":"XL"}`),
		http.StatusBadRequest, "invalid_request")

	s.dueLottery(t, saleID)
	res, err := store.DrawLottery(t.Context(), saleID, nil)
	require.NoError(t, err)
	require.True(t, res.Drew)
	require.Equal(t, 6, res.Won)
	require.Equal(t, map[string]int{"S": 2, "M": 1, "L": 3}, res.WonVariants)

	r := s.do(t, http.MethodGet, "/sales/"+saleID+"/draw", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	var tr api.DrawTranscript
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	require.Equal(t, "flashline/lottery/draw/v3", tr.Formula)
	require.Equal(t, []api.TranscriptVariant{{SKU: "S", Units: 2}, {SKU: "M", Units: 1}, {SKU: "L", Units: 3}}, tr.Variants)
	ok, why := verifies(t, tr)
	require.True(t, ok, why)

	// Each variant awarded exactly its units, in draw order, as the
	// database records them.
	byRegistrant := map[string]string{}
	for id := range auths {
		byRegistrant[flashline.RegistrantOf(saleID, id).String()] = id
	}
	ranked := make([]string, len(tr.Registrants))
	for i, x := range tr.Registrants {
		require.Equal(t, i+1, x.Rank)
		ranked[i] = byRegistrant[x.Registrant]
		require.Equal(t, named[ranked[i]], x.Variant)
	}
	want := wantedAwards(func() []string {
		c := make([]string, len(ranked))
		for i, id := range ranked {
			c[i] = named[id]
		}
		return c
	}())
	perVariant := map[string]int{}
	var winners []string
	for i, id := range ranked {
		require.Equal(t, want[i], tr.Registrants[i].Award, "rank %d", i+1)
		reg := s.registration(t, saleID, auths[id])
		var full api.Registration
		require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/registration", auths[id], "").Body, &full))
		require.Equal(t, want[i], full.WonVariant, "rank %d", i+1)
		if want[i] != "" {
			perVariant[want[i]]++
			winners = append(winners, id)
			require.Equal(t, "won", reg.State)
			require.NotEmpty(t, reg.AdmissionToken)
		} else {
			require.Equal(t, "lost", reg.State)
			require.Empty(t, reg.AdmissionToken)
		}
	}
	require.Equal(t, map[string]int{"S": 2, "M": 1, "L": 3}, perVariant)
	require.Len(t, tr.Winners, 6)

	// An altered award, a winner dropped or added, or a changed choice:
	// verify-draw's check fails.
	alter := func(name string, f func(tr *api.DrawTranscript)) {
		var bad api.DrawTranscript
		require.NoError(t, json.Unmarshal(r.Body, &bad))
		f(&bad)
		ok, why := verifies(t, bad)
		require.False(t, ok, name)
		t.Logf("%s: %s", name, why)
	}
	firstWinner, firstLoser := -1, -1
	for i, x := range tr.Registrants {
		if x.Award != "" && firstWinner < 0 {
			firstWinner = i
		}
		if x.Award == "" && firstLoser < 0 {
			firstLoser = i
		}
	}
	alter("AwardChanged", func(b *api.DrawTranscript) {
		if b.Registrants[firstWinner].Award == "L" {
			b.Registrants[firstWinner].Award = "S"
		} else {
			b.Registrants[firstWinner].Award = "L"
		}
	})
	alter("AwardDropped", func(b *api.DrawTranscript) { b.Registrants[firstWinner].Award = "" })
	alter("AwardAdded", func(b *api.DrawTranscript) { b.Registrants[firstLoser].Award = "M" })
	alter("UnitsChanged", func(b *api.DrawTranscript) { b.Variants[1].Units = 2; b.Units = 7 })
	alter("ChoiceChanged", func(b *api.DrawTranscript) {
		if b.Registrants[firstLoser].Variant == "any" {
			b.Registrants[firstLoser].Variant = "M"
		} else {
			b.Registrants[firstLoser].Variant = "any"
		}
	})
	alter("FormulaV2", func(b *api.DrawTranscript) { b.Formula = api.DrawFormula })

	// A winner reserves the variant won, and no other, with their
	// admission; the admission is single use.
	for _, id := range winners {
		won := want[indexOf(ranked, id)]
		other := "M"
		if won == "M" {
			other = "L"
		}
		tok := s.registration(t, saleID, auths[id]).AdmissionToken
		requireError(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[id], fmt.Sprintf(`{"variant":%q}`, other),
			"Idempotency-Key", "other-"+id, "X-Admission-Token", tok), http.StatusForbidden, "variant_not_won")
		buy := s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[id], fmt.Sprintf(`{"variant":%q}`, won),
			"Idempotency-Key", "buy-"+id, "X-Admission-Token", tok)
		require.Equal(t, http.StatusCreated, buy.Status, "body: %s", buy.Body)
		var held struct {
			Variant string `json:"variant"`
		}
		require.NoError(t, json.Unmarshal(buy.Body, &held))
		require.Equal(t, won, held.Variant)
		requireError(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[id], fmt.Sprintf(`{"variant":%q}`, other),
			"Idempotency-Key", "again-"+id, "X-Admission-Token", tok), http.StatusForbidden, "variant_not_won")
	}
	// A loser has no admission.
	loser := ranked[firstLoser]
	requireError(t, s.reserve(t, saleID, auths[loser], "k-"+loser, `{"variant":"S"}`), http.StatusForbidden, "admission_required")

	// The won notifications name the variant.
	var named3 int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM lottery_notifications
		WHERE sale_id = $1 AND kind = 'won' AND payload->'data'->>'variant' IS NOT NULL`, saleID).Scan(&named3))
	require.Equal(t, 6, named3)
}

// TestLotteryVariantsWaitlist: a unit passed down goes to the next
// waitlisted who named its variant or any, who wins that variant.
func TestLotteryVariantsWaitlist(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	saleID := s.createSale(t, lotteryVariantsBody(`,"waitlist":true`)).SaleID
	auths, named := map[string]string{}, map[string]string{}
	for i := range 12 {
		id := fmt.Sprintf("cust_w%02d", i)
		auths[id], named[id] = customer(t, id), []string{"M", "M", "M", "any", "S", "L"}[i%6]
		require.Equal(t, http.StatusCreated, s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", auths[id],
			fmt.Sprintf(`{"variant":%q}`, named[id])).Status)
	}
	s.dueLottery(t, saleID)
	_, err := store.DrawLottery(t.Context(), saleID, nil)
	require.NoError(t, err)
	regs := map[string]api.Registration{}
	read := func() {
		for id, a := range auths {
			var reg api.Registration
			require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/registration", a, "").Body, &reg))
			regs[id] = reg
		}
	}
	read()
	// The M winner's window ends unbought.
	mWinner := endWinnersWindow(t, s, store, saleID, regs, "M")
	before := regs
	regs = map[string]api.Registration{}
	read()
	require.Equal(t, "expired", regs[mWinner].State)
	// The promoted one: the best-ranked waitlisted who named M or any.
	best := ""
	for id, reg := range before {
		if reg.State == "waitlisted" && (named[id] == "M" || named[id] == "any") && (best == "" || reg.DrawRank < before[best].DrawRank) {
			best = id
		}
	}
	require.NotEmpty(t, best)
	for id, reg := range regs {
		if id == mWinner {
			continue
		}
		if id == best {
			require.Equal(t, "won", reg.State)
			require.Equal(t, "M", reg.WonVariant)
			continue
		}
		require.Equal(t, before[id].State, reg.State, id)
	}
	// The transcript does not change with the waitlist.
	r := s.do(t, http.MethodGet, "/sales/"+saleID+"/draw", "", "")
	var tr api.DrawTranscript
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	ok, why := verifies(t, tr)
	require.True(t, ok, why)
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// endWinnersWindow ends, unbought, the purchase window of the winner of
// variant in regs, and runs the job that expires windows (promoting the
// waitlist); it returns that winner.
func endWinnersWindow(t *testing.T, s *server, store *postgres.Store, saleID string, regs map[string]api.Registration, variant string) string {
	t.Helper()
	var winner string
	for id, reg := range regs {
		if reg.State == "won" && reg.WonVariant == variant {
			winner = id
		}
	}
	require.NotEmpty(t, winner)
	_, err := s.pool.Exec(t.Context(), `UPDATE lottery_registrations SET purchase_window_ends_at = now() - interval '1 second'
		WHERE sale_id = $1 AND customer_id = $2`, saleID, winner)
	require.NoError(t, err)
	_, err = store.ExpireWindows(t.Context(), 0)
	require.NoError(t, err)
	return winner
}
