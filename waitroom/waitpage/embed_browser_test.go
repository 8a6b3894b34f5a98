package waitpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v84/webhook"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// The buy button on a shop's own page (embed.js), in headless Chromium: the
// shop's page is served from another origin (another loopback port) and
// includes Flashline's script; the button waits in line before the open,
// solves the challenge, gets a hold, hands its id to the shop's page (an
// event, then the shop's checkout URL), and shows the order once Stripe's
// webhook has confirmed it.

const embedStripeSecret = "whsec_browser_test_0123456789abcdefABCDEF"

// shopPage is the shop's product page (and, at /checkout/{id}, its
// checkout page: the same button shows the hold there). The token comes
// from a callback, late (a promise), as a shop's session would give it.
const shopPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Trail shop</title>
<style>#drop { --flashline-accent: #c2185b; --flashline-radius: 0; }</style></head>
<body>
<h1>Trail runner, limited</h1>
<div id="drop"></div>
<p>Hold: <span id="hold"></span> · checkout: <span id="checkout"></span> · order: <span id="order"></span></p>
<script>
window.shopToken = function () {
  return new Promise(function (resolve) { setTimeout(function () { resolve({{JWT}}); }, 50); });
};
document.addEventListener("flashline:reserved", function (e) { document.getElementById("hold").textContent = e.detail.reservationId; });
document.addEventListener("flashline:checkout", function (e) { document.getElementById("checkout").textContent = e.detail.reservationId; });
document.addEventListener("flashline:order", function (e) { document.getElementById("order").textContent = e.detail.orderId; });
</script>
<script src="{{FLASHLINE}}/embed.js" data-sale="{{SALE}}" data-token="shopToken" data-target="#drop"
        data-checkout-url="/checkout/{reservationId}"></script>
</body></html>`

// in evaluates expr with the button's shadow root as root.
func in(expr string) string {
	return `(function () { var h = document.getElementById("drop"); var root = h && h.shadowRoot; if (!root || !root.getElementById("app")) return null; return ` + expr + `; })()`
}

func TestEmbedOnAShopPage(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t), "--stripe-webhook-secret", embedStripeSecret)
	c := testserver.NewClient()
	opensAt := time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_embed","title":"Trail runner","initialStock":2,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room","fairness":"arrival_order","challengeBits":8,`+
		`"price":{"amount":4900,"currency":"EUR"}}`, opensAt))
	jwt := testserver.Token(t, "shop-customer")
	quotedJWT, err := json.Marshal(jwt)
	require.NoError(t, err)

	var mu sync.Mutex
	var shopPaths []string
	html := strings.NewReplacer("{{JWT}}", string(quotedJWT), "{{FLASHLINE}}", srv.URL, "{{SALE}}", saleID).Replace(shopPage)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		shopPaths = append(shopPaths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	}))
	t.Cleanup(shop.Close)
	require.NotEqual(t, strings.Split(srv.URL, ":")[2], strings.Split(shop.URL, ":")[2], "the shop is another origin")

	// "" until the script has made its shadow root (a page just loaded).
	state := func() string { return eval[string](b, "("+in(`root.getElementById("app").dataset.state`)+`) || ""`) }
	waitEmbed := func(timeout time.Duration, want ...string) string {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			st := state()
			for _, w := range want {
				if st == w {
					return st
				}
			}
			if st == "error" || st == "signin" {
				b.fail("the button is in state %q (%s) waiting for %v", st, eval[string](b, in(`root.getElementById("app").innerText`)), want)
			}
			if time.Now().After(deadline) {
				b.fail("the button shows no state %v within %s (last %q)", want, timeout, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	text := func(id string) string {
		t.Helper()
		return eval[string](b, in(fmt.Sprintf(`root.getElementById(%q).textContent`, id)))
	}

	// Before the open: in line, with the countdown to it and a place.
	b.do("open the shop's page", 30*time.Second, chromedp.Navigate(shop.URL+"/products/trail-runner"))
	waitEmbed(30*time.Second, "waiting")
	// The countdown shows until the open: on a machine slow enough that
	// the page was in line only after it (CI once took longer than the 8 s
	// this sale gives), there is none to check.
	if opens, _ := time.Parse(time.RFC3339, opensAt); time.Until(opens) > time.Second {
		if hidden := eval[bool](b, in(`root.getElementById("opens-countdown").hidden`)); hidden {
			b.fail("no countdown to the open, %s before it", time.Until(opens).Round(time.Second))
		}
		if !regexp.MustCompile(`^\d+:\d\d$`).MatchString(text("opens-left")) {
			b.fail("countdown %q", text("opens-left"))
		}
	} else {
		t.Logf("waitpage: in line %s before the open (slow machine): the countdown to it not checked", time.Until(opens).Round(time.Second))
	}
	if !regexp.MustCompile(`^\d`).MatchString(text("position")) {
		b.fail("waiting without a place: %q", text("position"))
	}
	if got := eval[string](b, `document.title`); got != "Trail shop" {
		b.fail("the button changed the shop's title to %q", got)
	}
	b.screenshot("embed-waiting.png")

	// The open, the challenge (solved in a worker started from the shop's
	// origin), the turn, the hold: its id handed to the shop's page.
	waitEmbed(120*time.Second, "reserved")
	reservationID := text("reservation-id")
	require.Regexp(t, `^res_`, reservationID)
	require.Equal(t, reservationID, eval[string](b, `document.getElementById("hold").textContent`), "flashline:reserved")
	if !regexp.MustCompile(`^\d+:\d\d$`).MatchString(text("countdown")) {
		b.fail("the hold's countdown: %q", text("countdown"))
	}
	pow := eval[string](b, storedJS(".pow"))
	require.Contains(t, pow, `"solution"`, "the challenge was solved on the shop's page")
	// Styled by the shop's custom property.
	require.Equal(t, "rgb(194, 24, 91)", eval[string](b, in(`getComputedStyle(root.getElementById("pay")).backgroundColor`)))
	b.screenshot("embed-reserved.png")

	// Pay: the shop's checkout, by its URL template.
	require.True(t, eval[bool](b, in(`(root.getElementById("pay").click(), true)`)))
	checkout := shop.URL + "/checkout/" + reservationID
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if eval[string](b, `location.href`) == checkout {
			break
		}
		if time.Now().After(end) {
			b.fail("Pay did not go to the shop's checkout %s", checkout)
		}
	}
	// The checkout page's button shows the same hold (kept on the shop's
	// origin), while the shop takes the payment.
	waitEmbed(30*time.Second, "reserved")
	require.Equal(t, reservationID, text("reservation-id"))

	// Stripe's webhook for the checkout's PaymentIntent confirms it.
	event, err := json.Marshal(map[string]any{
		"id": "evt_embed_1", "object": "event", "type": "payment_intent.succeeded", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": "pi_embed_1", "object": "payment_intent", "amount": 4900, "amount_received": 4900, "currency": "eur",
			"status": "succeeded", "metadata": map[string]any{"reservation_id": reservationID},
		}},
	})
	require.NoError(t, err)
	sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: event, Secret: embedStripeSecret}).Header
	r, err := c.Do(context.Background(), http.MethodPost, srv.URL+"/payments/stripe", "", string(event), "Stripe-Signature", sig)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var outcome struct{ Outcome, OrderID string }
	require.NoError(t, json.Unmarshal(r.Body, &outcome))
	require.Equal(t, "confirmed", outcome.Outcome, "%s", r.Body)

	// The button shows the order, and hands it to the shop's page.
	waitEmbed(60*time.Second, "paid")
	require.Equal(t, outcome.OrderID, text("order-id"))
	for end := time.Now().Add(10 * time.Second); eval[string](b, `document.getElementById("order").textContent`) != outcome.OrderID; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			b.fail("flashline:order did not reach the shop's page")
		}
	}
	b.screenshot("embed-paid.png")
	if bad := b.policyViolations(); len(bad) > 0 {
		b.fail("console errors: %v", bad)
	}
	mu.Lock()
	require.Equal(t, []string{"/products/trail-runner", "/checkout/" + reservationID}, shopPaths, "the shop's server saw its two pages, nothing of Flashline's")
	mu.Unlock()

	api := c.To(srv.URL)
	res, err := api.Reservation(context.Background(), jwt, reservationID)
	require.NoError(t, err)
	require.Equal(t, "confirmed", string(res.Value.State))
	require.Equal(t, outcome.OrderID, res.Value.OrderID)
}

// TestEmbedCheckoutURLOnlyHTTP: data-checkout-url was followed whatever its
// scheme, so a javascript: URL ran in the shop's origin when the shopper
// pressed Pay. embed.js now keeps only an http(s) or a relative URL and
// ignores anything else with a console warning. Flashline's side here is the
// page's routes alone (register): the check runs when embed.js
// loads, before any API call.
func TestEmbedCheckoutURLOnlyHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium: not in -short")
	}
	b := newBrowser(t)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	register(r)
	flashline := httptest.NewServer(r)
	t.Cleanup(flashline.Close)
	var page atomic.Value
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page.Load().(string)))
	}))
	t.Cleanup(shop.Close)
	for _, tc := range []struct{ name, url, want string }{
		{"Relative", "/checkout/{reservationId}", "/checkout/{reservationId}"},
		{"HTTPS", "https://shop.example/checkout?hold={reservationId}", "https://shop.example/checkout?hold={reservationId}"},
		{"JavascriptIgnored", "javascript:alert(document.cookie)//{reservationId}", ""},
		{"MixedCaseJavascriptIgnored", " JavaScript:alert(1)", ""},
		{"DataIgnored", "data:text/html,<script>alert(1)</script>", ""},
	} {
		page.Store(`<!doctype html><title>Shop</title><div id="drop"></div>
<script src="` + flashline.URL + `/embed.js" data-sale="sale_x" data-target="#drop" data-checkout-url="` + html.EscapeString(tc.url) + `"></script>`)
		b.do("open the shop's page", 30*time.Second, chromedp.Navigate(shop.URL+"/"+tc.name))
		got := eval[string](b, `window.__flashlineEmbed ? window.__flashlineEmbed.checkoutURL : "no embed"`)
		require.Equal(t, tc.want, got, "%s: data-checkout-url %q", tc.name, tc.url)
		if tc.want == "" {
			warned := false
			b.mu.Lock()
			for _, m := range b.console {
				warned = warned || strings.Contains(m.Text, "data-checkout-url") && strings.Contains(m.Text, "is ignored")
			}
			b.mu.Unlock()
			require.True(t, warned, "%s: a console warning says the URL is ignored", tc.name)
		}
	}
}
