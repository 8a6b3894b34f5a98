package waitpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestWaitPageChoosesAVariant: a sale with three variants (Small, Medium,
// Large) through one waiting room. Small is gone before the shopper's
// turn: admitted, the page shows the choice with Small greyed and not
// selectable. Medium's last unit goes to someone else while the shopper
// chooses it: the reservation is refused (409 variant_sold_out), the page
// greys Medium and says so; a reload (in Arabic: right to left) shows the
// same choice; the keyboard chooses Large, and the reservation is made with
// the same admission (no ticket or status request in between) and names
// Large; the hold and the order show its title.
func TestWaitPageChoosesAVariant(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	ctx := context.Background()
	saleID := c.CreateSale(t, srv.URL, `{"sku":"drop_page","title":"Trail runner","perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"admission":"waiting_room","confirmation":"customer",`+
		`"variants":[{"sku":"S","title":"Small","stock":1},{"sku":"M","title":"Medium","stock":1},{"sku":"L","title":"Large","stock":3}]}`)
	admin := func(path, body string) {
		t.Helper()
		r, err := c.Do(ctx, http.MethodPost, srv.URL+"/admin/sales/"+saleID+path, testserver.AdminToken, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
	}
	admin("/open", "")
	admin("/queue/hold", "") // nobody is let in while Small goes elsewhere

	// takeLast reserves variant sku's last unit as customer, admitted
	// earlier (an admission signed with the room's keys).
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)
	takeLast := func(customer, sku string) {
		t.Helper()
		admission := keys.SignAdmission(roomtoken.Admission{ID: "adm-" + customer, SaleID: saleID, CustomerID: customer, ExpiresAt: time.Now().Add(time.Minute)})
		r, err := c.Do(ctx, http.MethodPost, srv.URL+"/sales/"+saleID+"/reservations", testserver.Token(t, customer),
			fmt.Sprintf(`{"variant":%q,"quantity":1}`, sku), "Idempotency-Key", "last-"+sku, "X-Admission-Token", admission)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}
	// soldOutSeen waits until the room's status answer, as a waiter
	// hears it, says variant sku is sold out.
	watcher := testserver.Token(t, "watcher")
	r, err := c.Do(ctx, http.MethodGet, srv.URL+"/sales/"+saleID+"/ticket", watcher, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var ticket struct{ Token string }
	require.NoError(t, json.Unmarshal(r.Body, &ticket))
	soldOutSeen := func(sku string) {
		t.Helper()
		require.Eventually(t, func() bool {
			r, err := c.Do(ctx, http.MethodGet, srv.URL+"/sales/"+saleID+"/status?token="+ticket.Token, watcher, "")
			if err != nil || r.Status != http.StatusOK {
				return false
			}
			var st struct {
				Variants []struct{ SKU, Availability string }
			}
			if json.Unmarshal(r.Body, &st) != nil {
				return false
			}
			for _, v := range st.Variants {
				if v.SKU == sku {
					return v.Availability == "sold_out"
				}
			}
			return false
		}, 30*time.Second, 500*time.Millisecond, "the status never says %s is sold out", sku)
	}
	// until waits for the page's expression js to be true.
	until := func(timeout time.Duration, what, js string) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !eval[bool](b, js) {
			if time.Now().After(deadline) {
				b.fail("%s: not within %s", what, timeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	radio := func(sku string) string { return fmt.Sprintf(`#variant-list input[value=%q]`, sku) }
	disabled := func(sku string) string {
		return fmt.Sprintf(`(function () { var i = document.querySelector(%q); return !!i && i.disabled && i.closest("label").classList.contains("sold-out"); })()`, radio(sku))
	}

	takeLast("early", "S")
	soldOutSeen("S")

	shopper := testserver.Token(t, "chooser")
	b.do("record fetches", 10*time.Second, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fetchRecorder})
		return chromedp.Void{}, err
	})
	b.do("open the page", 30*time.Second, chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait#token="+shopper))
	b.adoptLinkToken()
	b.waitState(30*time.Second, "paused")
	admin("/queue/release", "")

	// Admitted: the choice, Small greyed and not selectable.
	b.waitState(60*time.Second, "choosing")
	titles := eval[[]string](b, `Array.from(document.querySelectorAll("#variant-list .variant-title")).map(function (e) { return e.textContent; })`)
	require.Equal(t, []string{"Small", "Medium", "Large"}, titles)
	if !eval[bool](b, disabled("S")) || eval[bool](b, disabled("M")) || eval[bool](b, disabled("L")) {
		b.fail("Small should be the one greyed and disabled")
	}
	if got := eval[float64](b, `parseFloat(getComputedStyle(document.querySelector("#variant-list label.sold-out")).opacity)`); got >= 1 {
		b.fail("the sold-out variant is not greyed (opacity %v)", got)
	}
	b.do("try to choose Small", 10*time.Second, chromedp.Click(chromedp.CSS(`#variant-list label.sold-out`)))
	if eval[bool](b, fmt.Sprintf(`document.querySelector(%q).checked`, radio("S"))) {
		b.fail("a sold-out variant could be chosen")
	}
	b.noHorizontalScroll("choosing")
	b.screenshot("variants-choice.png")

	// Medium's last unit goes elsewhere while the shopper chooses it.
	takeLast("rival", "M")
	b.do("choose Medium and reserve", 10*time.Second,
		chromedp.Click(chromedp.CSS(radio("M"))),
		chromedp.Click(chromedp.ID("variant-reserve")))
	until(60*time.Second, "Medium greyed after variant_sold_out",
		`document.getElementById("app").dataset.state === "choosing" && !document.getElementById("variant-note").hidden && `+disabled("M"))
	if note := eval[string](b, `document.getElementById("variant-note").textContent`); !strings.Contains(note, "Medium") {
		b.fail("the note after variant_sold_out says %q, not that Medium is gone", note)
	}
	b.screenshot("variants-gone.png")
	seen409 := false
	for _, e := range eval[[]fetchEntry](b, `window.__flashlineFetches || []`) {
		seen409 = seen409 || (strings.Contains(e.URL, "/reservations") && e.Status == http.StatusConflict)
	}
	if !seen409 {
		b.fail("Medium greyed without a 409 from the reservation")
	}

	// A reload, in Arabic, keeps the admission and the choice (Small and
	// Medium greyed), mirrored: the radio buttons on the right.
	b.do("reload in Arabic", 30*time.Second, chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait?lang=ar"))
	b.waitState(30*time.Second, "choosing")
	if !eval[bool](b, disabled("S")) || !eval[bool](b, disabled("M")) || eval[bool](b, disabled("L")) {
		b.fail("after a reload Small and Medium should be greyed, Large not")
	}
	if got := eval[string](b, `getComputedStyle(document.getElementById("variant-list")).direction`); got != "rtl" {
		b.fail("the choice's direction in Arabic is %q", got)
	}
	if !eval[bool](b, fmt.Sprintf(`(function () { var i = document.querySelector(%q); return i.getBoundingClientRect().left > i.nextElementSibling.getBoundingClientRect().left; })()`, radio("L"))) {
		b.fail("in Arabic the radio button is not on the right of its title")
	}
	b.noHorizontalScroll("choosing in Arabic")
	b.screenshot("variants-choice-ar.png")

	// The keyboard: the focus is on the first one left (Large); Space
	// chooses it.
	if got := eval[string](b, `document.activeElement ? document.activeElement.value || "" : ""`); got != "L" {
		b.fail("after variant_sold_out the focus is on %q, want Large", got)
	}
	b.do("choose Large with the keyboard", 10*time.Second, chromedp.KeyEvent(" "))
	until(10*time.Second, "Large chosen", fmt.Sprintf(`document.querySelector(%q).checked`, radio("L")))
	b.do("reserve", 10*time.Second, chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter))

	b.waitState(60*time.Second, "reserved")
	if got := eval[string](b, `document.getElementById("reserved-variant-title").textContent`); got != "Large" {
		b.fail("the hold shows variant %q, want Large", got)
	}
	if eval[bool](b, `document.getElementById("reserved-variant").hidden`) {
		b.fail("the hold's variant is hidden")
	}
	reservationID := eval[string](b, `document.getElementById("reservation-id").textContent`)
	r, err = c.Do(ctx, http.MethodGet, srv.URL+"/reservations/"+reservationID, shopper, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var res struct{ Variant, State string }
	require.NoError(t, json.Unmarshal(r.Body, &res))
	require.Equal(t, "L", res.Variant, "the reservation names the variant chosen")

	// One admission: since the reload the page asked for no ticket and no
	// status, and its one reservation request made the hold.
	var reservations []fetchEntry
	for _, e := range eval[[]fetchEntry](b, `window.__flashlineFetches || []`) {
		if strings.Contains(e.URL, "/ticket") || strings.Contains(e.URL, "/status") {
			b.fail("after variant_sold_out the page went back to the line: %s", e.URL)
		}
		if strings.Contains(e.URL, "/sales/"+saleID+"/reservations") {
			reservations = append(reservations, e)
		}
	}
	if len(reservations) != 1 || reservations[0].Status != http.StatusCreated {
		b.fail("after the reload the page's reservations were %+v, want one 201", reservations)
	}
	b.noHorizontalScroll("reserved")
	b.screenshot("variants-reserved.png")

	b.do("click #pay", 10*time.Second, chromedp.Click(chromedp.ID("pay")))
	b.waitState(30*time.Second, "paid")
	if got := eval[string](b, `document.getElementById("paid-variant-title").textContent`); got != "Large" {
		b.fail("the order shows variant %q, want Large", got)
	}
	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
}
