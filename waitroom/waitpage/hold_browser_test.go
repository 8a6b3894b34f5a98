package waitpage_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestWaitPageFindsAHoldMadeElsewhere: a customer reserves, then loses the
// tab (everything the page kept is gone, as in a new browser). Back in the
// line and admitted again, the reservation is refused with the hold that
// holds the limit: the page shows that hold, with its Pay step, and paying
// it makes the order.
func TestWaitPageFindsAHoldMadeElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	api := c.To(srv.URL)
	opensAt := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_lost_tab","initialStock":3,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room","fairness":"arrival_order","confirmation":"customer"}`, opensAt))
	jwt := testserver.Token(t, "lost-tab")
	reservationID := func() string {
		return eval[string](b, `document.getElementById("reservation-id").textContent`)
	}

	b.do("open the waiting room", 30*time.Second, chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait#token="+jwt))
	b.adoptLinkToken()
	b.waitState(90*time.Second, "reserved")
	first := reservationID()
	require.NotEmpty(t, first)

	// The tab is closed and the browser's storage with it (cleared from a
	// page of the origin that runs no script of the flow, which would keep
	// the hold again).
	b.do("lose the tab", 30*time.Second,
		chromedp.Navigate(srv.URL+"/healthz"),
		chromedp.Evaluate[chromedp.Void](`localStorage.clear(); sessionStorage.clear()`),
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait#token="+jwt))
	b.adoptLinkToken()
	if st := b.waitState(90*time.Second, "reserved", "limit_reached"); st != "reserved" {
		b.fail("a new browser says %q, not the hold made before", st)
	}
	if got := reservationID(); got != first {
		b.fail("a new browser shows reservation %q, want the hold made before, %q", got, first)
	}

	b.do("click #pay", 10*time.Second, chromedp.Click(chromedp.ID("pay")))
	b.waitState(30*time.Second, "paid")
	r, err := api.Reservation(context.Background(), jwt, first)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "confirmed", string(r.Value.State))
	require.Equal(t, r.Value.OrderID, eval[string](b, `document.getElementById("order-id").textContent`))
	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy: %v", bad)
	}
}
