package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
)

// TestAnswersNameTheVariant: in a sale with variants every answer that
// shows a reservation names its variant (the 201 and its replay, GET by id,
// the customer's own, the limit_reached refusal, the confirm's order), each
// exchange checked against the OpenAPI document; the report lists each
// variant's units.
func TestAnswersNameTheVariant(t *testing.T) {
	t.Parallel()
	s, _, cookie := consoleServer(t)
	sale := s.createSale(t, `{"sku":"drop_49","confirmation":"customer",
		"variants":[{"sku":"S","stock":2},{"sku":"XL","title":"Extra large","stock":2}]}`)
	alice := customer(t, "alice")
	variantOf := func(r reply, status int) string {
		t.Helper()
		require.Equal(t, status, r.Status, "body: %s", r.Body)
		var v struct {
			Variant     string `json:"variant"`
			Reservation *struct {
				Variant string `json:"variant"`
			} `json:"reservation"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &v))
		if v.Reservation != nil {
			return v.Reservation.Variant
		}
		return v.Variant
	}

	created := s.reserve(t, sale.SaleID, alice, "k1", `{"variant":"XL","quantity":1}`)
	res := requireReservation(t, created, http.StatusCreated)
	require.Equal(t, "XL", variantOf(created, http.StatusCreated))
	replay := s.reserve(t, sale.SaleID, alice, "k1", `{"variant":"XL","quantity":1}`)
	require.Equal(t, string(created.Body), string(replay.Body))
	require.Equal(t, "XL", variantOf(s.do(t, http.MethodGet, "/reservations/"+res.ReservationID, alice, ""), http.StatusOK))
	require.Equal(t, "XL", variantOf(s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/reservation", alice, ""), http.StatusOK))
	require.Equal(t, "XL", variantOf(s.reserve(t, sale.SaleID, alice, "k2", `{"variant":"S","quantity":1}`), http.StatusConflict))
	require.Equal(t, "XL", variantOf(s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/confirm", alice, ""), http.StatusOK))

	// The report gives each variant's units, as JSON and on its page.
	r := s.do(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/report", adminAuth, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var rep api.Report
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.Len(t, rep.Sale.Variants, 2)
	require.Equal(t, api.Variant{SKU: "XL", Title: "Extra large", InitialStock: 2, Available: 1, Confirmed: 1}, rep.Sale.Variants[1])
	page := s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/report", "", "", "Accept", "text/html", "Cookie", cookie)
	require.Equal(t, http.StatusOK, page.Status, "%s", page.Body)
	require.Contains(t, string(page.Body), `<td><code>XL</code></td><td>Extra large</td><td>2</td><td>1</td><td>0</td><td>1</td>`)

	// A sale without variants: the answers are as they were (requireOrder
	// holds the order to its two fields).
	plain := s.createSale(t, `{"sku":"sku_991","initialStock":2,"confirmation":"customer"}`)
	bob := customer(t, "bob")
	held := requireCreated(t, s.reserve(t, plain.SaleID, bob, "b1", `{"quantity":1}`), plain.SaleID, 1)
	requireOrder(t, s.do(t, http.MethodPost, "/reservations/"+held.ReservationID+"/confirm", bob, ""), held.ReservationID)
}
