package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/client"
)

// TestAdminSalesPages: GET /admin/sales lists the sales newest first, a page
// at a time (next is the after of the following page), in the states asked
// for as a reader sees them (sold out, a scheduled sale past its time open),
// and answers 400 to a parameter it cannot use.
func TestAdminSalesPages(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	open1 := s.createSale(t, `{"sku":"list-1","initialStock":2,"confirmation":"customer"}`)
	later := s.createSale(t, `{"sku":"list-2","initialStock":2,"opensAt":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	soldOut := s.createSale(t, `{"sku":"list-3","initialStock":1,"confirmation":"customer"}`)
	requireCreated(t, s.reserve(t, soldOut.SaleID, customer(t, "cust-list"), "k-list", `{"quantity":1}`), soldOut.SaleID, 1)
	paused := s.createSale(t, `{"sku":"list-4","initialStock":2,"confirmation":"customer"}`)
	require.Equal(t, http.StatusOK, s.do(t, http.MethodPost, "/admin/sales/"+paused.SaleID+"/pause", adminAuth, "").Status)

	ids := func(l client.SaleList) []string {
		out := make([]string, len(l.Sales))
		for i, sale := range l.Sales {
			out[i] = sale.SaleID
		}
		return out
	}
	all, err := s.api.Sales(ctx, adminToken, client.SalePage{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, all.Status, "%s", all.Body)
	require.Equal(t, []string{paused.SaleID, soldOut.SaleID, later.SaleID, open1.SaleID}, ids(all.Value))
	require.Empty(t, all.Value.Next)
	require.Equal(t, "sold_out", all.Value.Sales[1].State)

	// Pages of 3 then the rest.
	p1, err := s.api.Sales(ctx, adminToken, client.SalePage{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []string{paused.SaleID, soldOut.SaleID, later.SaleID}, ids(p1.Value))
	require.Equal(t, later.SaleID, p1.Value.Next)
	p2, err := s.api.Sales(ctx, adminToken, client.SalePage{Limit: 3, After: p1.Value.Next})
	require.NoError(t, err)
	require.Equal(t, []string{open1.SaleID}, ids(p2.Value))
	require.Empty(t, p2.Value.Next)

	// By state, as shown.
	for _, tt := range []struct {
		states []string
		want   []string
	}{
		{[]string{"sold_out"}, []string{soldOut.SaleID}},
		{[]string{"open"}, []string{open1.SaleID}},
		{[]string{"scheduled", "paused"}, []string{paused.SaleID, later.SaleID}},
		{[]string{"closed"}, []string{}},
	} {
		r, err := s.api.Sales(ctx, adminToken, client.SalePage{States: tt.states})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, tt.want, ids(r.Value), "%v", tt.states)
	}

	for _, bad := range []string{"?limit=0", "?limit=101", "?limit=x", "?state=sold", "?after=sale_nope",
		"?after=" + strings.Repeat("a", 70)} {
		requireError(t, s.do(t, http.MethodGet, "/admin/sales"+bad, adminAuth, ""), http.StatusBadRequest, "invalid_request")
	}
	// Admins only.
	require.Equal(t, http.StatusUnauthorized, s.do(t, http.MethodGet, "/admin/sales", "", "").Status)
}
