package waitpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestWaitPageLottery: a lottery sale's page, in headless Chromium against a
// serve process: the customer registers (solving the registration's proof of
// work), waits for the draw, is drawn, reserves with the admission token the
// registration gives, and pays.
//
// The registration window stays open for ten minutes, however long a busy
// machine takes to start the browser; once the customer is registered, the
// test closes it and brings the draw (and so the sale's opening) forward in
// the database, as a store whose draw time had come would see it. The page,
// which still has the old draw time, asks again within 30 s by itself.
func TestWaitPageLottery(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t)
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL)
	c := testserver.NewClient()
	now := time.Now().UTC()
	drawAt := now.Add(10 * time.Minute).Truncate(time.Second)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_lottery","initialStock":1,"confirmation":"customer",
		"admission":"lottery","challengeBits":8,"registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,
		"purchaseWindowSeconds":300}`, now.Add(-time.Second).Format(time.RFC3339), drawAt.Format(time.RFC3339), drawAt.Format(time.RFC3339)))
	jwt := testserver.Token(t, "browser-lottery")

	b.do("open the sale's page", 30*time.Second, chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait#token="+jwt))
	b.adoptLinkToken()
	b.waitState(30*time.Second, "lottery")
	title := func() string { return eval[string](b, `document.getElementById("lottery-title").textContent`) }
	if title() != "Register for the draw" || eval[bool](b, `document.getElementById("lottery-form").hidden`) {
		b.fail("the page does not offer to register: %q", title())
	}
	b.noHorizontalScroll("lottery registration")
	b.screenshot("lottery-register.png")
	if eval[bool](b, `document.getElementById("lottery-instrument") !== null`) {
		b.fail("the page asks for a payment instrument: the shopper's word no longer counts")
	}
	b.do("click #lottery-register", 10*time.Second, chromedp.Click(chromedp.ID("lottery-register")))
	for deadline := time.Now().Add(20 * time.Second); title() != "You are registered"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.fail("not registered within 20 s: %q", title())
		}
	}
	b.screenshot("lottery-registered.png")

	// The draw time comes: the draw job draws, and the page, at its next
	// poll, finds the customer drawn and reserves by itself.
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// The sale opens at its draw; the trigger on sales.opens_at tells the
	// serve process's sale cache.
	for _, stmt := range []string{
		`UPDATE lotteries SET registration_closes_at = now(), draw_at = now() WHERE sale_id = $1`,
		`UPDATE sales SET opens_at = now() WHERE sale_id = $1`,
	} {
		_, err = conn.Exec(context.Background(), stmt, saleID)
		require.NoError(t, err)
	}
	b.waitState(90*time.Second, "reserved")
	// Drawn, the page shows the shopper's own rank and links the draw's
	// public transcript, and keeps them shown while the winner buys.
	if eval[bool](b, `document.getElementById("draw-result").hidden`) {
		b.fail("the page does not show the shopper's rank once drawn")
	}
	require.Equal(t, "Your rank in the draw: 1.", eval[string](b, `document.getElementById("draw-rank").textContent`))
	href := eval[string](b, `document.getElementById("draw-transcript").hidden ? "" : document.getElementById("draw-transcript").href`)
	require.Equal(t, srv.URL+"/sales/"+saleID+"/draw", href, "the link to the draw's transcript")
	r, err := c.Do(context.Background(), http.MethodGet, href, "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), `"status":"drawn"`)
	reservationID := eval[string](b, `document.getElementById("reservation-id").textContent`)
	require.True(t, strings.HasPrefix(reservationID, "res_"), reservationID)
	b.do("click #pay", 10*time.Second, chromedp.Click(chromedp.ID("pay")))
	b.waitState(30*time.Second, "paid")
	b.screenshot("lottery-paid.png")

	r, err = c.Do(context.Background(), http.MethodGet, srv.URL+"/reservations/"+reservationID, jwt, "")
	require.NoError(t, err)
	var res struct{ State string }
	require.NoError(t, json.Unmarshal(r.Body, &res))
	require.Equal(t, "confirmed", res.State)
	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
}
