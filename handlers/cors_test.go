package handlers_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/waitroom"
)

// TestCORS: the routes the waiting-room page calls answer any origin, their
// preflights included, refusals too; the admin's routes answer none.
func TestCORS(t *testing.T) {
	t.Parallel()
	s := startServer(t, &waitroom.Options{})
	sale := s.createSale(t, `{"sku":"sku_c","initialStock":5,"admission":"waiting_room"}`)
	origin := []string{"Origin", "https://shop.example"}
	res := flashline.NewID(flashline.ReservationIDPrefix)

	t.Run("Preflight", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ path, methods string }{
			{"/sales/" + sale.SaleID + "/ticket", "GET, OPTIONS"},
			{"/sales/" + sale.SaleID + "/status", "GET, OPTIONS"},
			{"/sales/" + sale.SaleID + "/policy", "GET, OPTIONS"},
			{"/sales/" + sale.SaleID + "/reservations", "POST, OPTIONS"},
			{"/reservations/" + res, "GET, OPTIONS"},
			{"/reservations/" + res + "/confirm", "POST, OPTIONS"},
			{"/reservations/" + res + "/cancel", "POST, OPTIONS"},
		} {
			r := s.do(t, http.MethodOptions, tt.path, "", "", append(origin,
				"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, idempotency-key, x-admission-token, content-type")...)
			require.Equal(t, http.StatusNoContent, r.Status, "%s: %s", tt.path, r.Body)
			require.Empty(t, r.Body)
			require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"), tt.path)
			require.Equal(t, tt.methods, r.Header.Get("Access-Control-Allow-Methods"), tt.path)
			require.Equal(t, handlers.CORSAllowHeaders, r.Header.Get("Access-Control-Allow-Headers"), tt.path)
			require.Equal(t, "600", r.Header.Get("Access-Control-Max-Age"), tt.path)
		}
	})
	t.Run("Answers", func(t *testing.T) {
		t.Parallel()
		r := s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/policy", "", "", origin...)
		require.Equal(t, 200, r.Status)
		require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, handlers.CORSExposeHeaders, r.Header.Get("Access-Control-Expose-Headers"))
		// A refusal before the handler (no token) is readable too.
		r = s.do(t, http.MethodGet, "/sales/"+sale.SaleID+"/ticket", "", "", origin...)
		requireError(t, r, 401, "unauthenticated")
		require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
		r = s.do(t, http.MethodPost, "/sales/"+sale.SaleID+"/reservations", customer(t, "cora"), `{"quantity":1}`, append(origin, "Idempotency-Key", "k1")...)
		requireError(t, r, 409, "sale_not_open")
		require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("NotOnAdminRoutes", func(t *testing.T) {
		t.Parallel()
		r := s.do(t, http.MethodGet, "/admin/sales/"+sale.SaleID, adminAuth, "", origin...)
		require.Equal(t, 200, r.Status)
		require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
		r = s.do(t, http.MethodOptions, "/admin/sales/"+sale.SaleID, "", "", append(origin, "Access-Control-Request-Method", "GET")...)
		requireError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
		r = s.do(t, http.MethodOptions, "/admin/sales", "", "", append(origin, "Access-Control-Request-Method", "POST")...)
		require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	})
}
