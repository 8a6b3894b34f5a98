package waitpage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestWaitPageSoldOutForNowThenForGood: a shopper waits while the last unit
// is taken; while its hold is pending the page says the sale is sold out for
// now and keeps asking; once the hold is confirmed (no unit can come back),
// it says sold out and stops.
func TestWaitPageSoldOutForNowThenForGood(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t)
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	ctx := context.Background()
	saleID := c.CreateSale(t, srv.URL, `{"sku":"sku_last","initialStock":1,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"admission":"waiting_room","confirmation":"customer"}`)
	admin := func(path string) {
		t.Helper()
		r, err := c.Do(ctx, http.MethodPost, srv.URL+"/admin/sales/"+saleID+path, testserver.AdminToken, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
	}
	admin("/open")
	admin("/queue/hold") // nobody is let in while the last unit goes elsewhere

	b.do("open the page", 30*time.Second,
		chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait#token="+testserver.Token(t, "shopper")))
	b.adoptLinkToken()
	b.waitState(20*time.Second, "paused")

	// Someone admitted earlier takes the last unit.
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)
	buyer := testserver.Token(t, "earlier")
	admission := keys.SignAdmission(roomtoken.Admission{ID: "adm-earlier", SaleID: saleID, CustomerID: "earlier", ExpiresAt: time.Now().Add(time.Minute)})
	r, err := c.Do(ctx, http.MethodPost, srv.URL+"/sales/"+saleID+"/reservations", buyer, `{"quantity":1}`,
		"Idempotency-Key", "last", "X-Admission-Token", admission)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var held struct{ ReservationID string }
	require.NoError(t, json.Unmarshal(r.Body, &held))

	b.waitState(20*time.Second, "sold_out_for_now")
	b.screenshot("sold-out-for-now.png")

	r, err = c.Do(ctx, http.MethodPost, srv.URL+"/reservations/"+held.ReservationID+"/confirm", buyer, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	b.waitState(20*time.Second, "sold_out")
	b.screenshot("sold-out.png")
}
