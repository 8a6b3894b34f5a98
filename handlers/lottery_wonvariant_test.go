package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestLotteryAdmissionNamesWonVariant: in a lottery with variants, a
// winner's admission token carries the variant won as a signed claim, the
// draw's award and a waitlist promotion's alike, and the reservation route
// refuses another variant from the token (403 variant_not_won).
func TestLotteryAdmissionNamesWonVariant(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	keys := roomtoken.DeriveKeyring(jwtSecret)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	saleID := s.createSale(t, lotteryVariantsBody(`,"waitlist":true`)).SaleID
	auths := map[string]string{}
	for i := range 8 {
		id := fmt.Sprintf("cust_t%02d", i)
		auths[id] = customer(t, id)
		require.Equal(t, http.StatusCreated, s.do(t, http.MethodPost, "/sales/"+saleID+"/registrations", auths[id],
			fmt.Sprintf(`{"variant":%q}`, []string{"M", "M", "any", "L"}[i%4])).Status)
	}
	s.dueLottery(t, saleID)
	_, err := store.DrawLottery(t.Context(), saleID, nil)
	require.NoError(t, err)
	read := func() map[string]api.Registration {
		regs := map[string]api.Registration{}
		for id, a := range auths {
			var reg api.Registration
			require.NoError(t, json.Unmarshal(s.do(t, http.MethodGet, "/sales/"+saleID+"/registration", a, "").Body, &reg))
			regs[id] = reg
		}
		return regs
	}
	requireClaims := func(regs map[string]api.Registration) {
		t.Helper()
		for id, reg := range regs {
			if reg.State != "won" {
				require.Empty(t, reg.AdmissionToken, id)
				continue
			}
			require.NotEmpty(t, reg.WonVariant, id)
			a, err := keys.ParseAdmission(reg.AdmissionToken)
			require.NoError(t, err, id)
			require.Equal(t, reg.RegistrationID, a.ID, id)
			require.Equal(t, reg.WonVariant, a.Variant, id)
		}
	}
	regs := read()
	requireClaims(regs)

	// The M winner's window ends unbought: the promoted one's admission
	// names the variant passed down.
	endWinnersWindow(t, s, store, saleID, regs, "M")
	after := read()
	requireClaims(after)
	promoted := ""
	for id, reg := range after {
		if reg.State == "won" && regs[id].State == "waitlisted" {
			promoted = id
		}
	}
	require.NotEmpty(t, promoted)
	require.Equal(t, "M", after[promoted].WonVariant)
	tok := after[promoted].AdmissionToken
	requireError(t, s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[promoted], `{"variant":"L"}`,
		"Idempotency-Key", "other-"+promoted, "X-Admission-Token", tok), http.StatusForbidden, "variant_not_won")
	buy := s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", auths[promoted], `{"variant":"M"}`,
		"Idempotency-Key", "buy-"+promoted, "X-Admission-Token", tok)
	require.Equal(t, http.StatusCreated, buy.Status, "body: %s", buy.Body)
}
