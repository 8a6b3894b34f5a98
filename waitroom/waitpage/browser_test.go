package waitpage_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testbrowser"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// The browser test drives the real page in headless Chromium on a phone-sized
// viewport against a real `flashline serve`, through the whole funnel:
// waiting → admitted → reserved → (reload) → paid, where the customer
// confirms; and waiting → … → reserved → awaiting payment → (the hold
// extended, the provider's event) → paid, where the payment does.

const (
	viewportWidth  = 390
	viewportHeight = 844
	// screenshotDir is under the repository's /screenshots/, which git
	// ignores: every run writes new ones.
	screenshotDir = "../../screenshots/waitpage"
)

// browser is one headless Chromium tab with its console collected.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	ctx := testbrowser.Start(t, viewportWidth, viewportHeight,
		chromedp.EmulateViewport(viewportWidth, viewportHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	b := &browser{t: t, ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions with a timeout.
func (b *browser) do(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression with a timeout.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate %s: %v", expr, err)
	}
	return v
}

const stateJS = `(function () { var a = document.getElementById("app"); return a ? a.dataset.state || "" : ""; })()`

// dump is what the page shows and keeps, for a failure message.
// adoptLinkToken answers the page's question about the customer token a
// link carried (#token=…, no token kept yet): continue with the link's
// account, as a customer the shop sent there does.
func (b *browser) adoptLinkToken() {
	b.t.Helper()
	b.waitState(30*time.Second, "choose_account")
	b.do("continue with the link's account", 10*time.Second, chromedp.Click(chromedp.ID("account-switch")))
}

func (b *browser) dump() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	var s strings.Builder
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](stateJS))
	fmt.Fprintf(&s, "data-state: %q (err %v)\n", state, err)
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	fmt.Fprintf(&s, "location: %s\n", loc)
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	fmt.Fprintf(&s, "page text (err %v):\n%s\n", err, text)
	storage, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(Object.assign({}, localStorage), null, 1)`))
	fmt.Fprintf(&s, "localStorage: %s\n", storage)
	b.mu.Lock()
	fmt.Fprintf(&s, "console (%d messages):\n", len(b.console))
	for _, m := range b.console {
		fmt.Fprintf(&s, "  %s\n", m)
	}
	b.mu.Unlock()
	return s.String()
}

func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	b.t.Fatalf("waitpage: "+format+"\n%s", append(args, b.dump())...)
}

// waitState waits until the page's data-state is one of want. The page's
// "error" state, when not wanted, fails at once.
func (b *browser) waitState(timeout time.Duration, want ...string) string {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		st, err := chromedp.Run(ctx, chromedp.Evaluate[string](stateJS))
		cancel()
		if err == nil {
			last = st
			if slices.Contains(want, st) {
				return st
			}
			if st == "error" && !slices.Contains(want, "error") {
				b.fail("page is in state error while waiting for %v", want)
			}
		}
		if time.Now().After(deadline) {
			b.fail("no state %v within %s (last %q, last err %v)", want, timeout, last, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reaches reports whether the page is in one of the states want within
// timeout, without failing the test when it is not.
func (b *browser) reaches(timeout time.Duration, want ...string) bool {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		st, err := chromedp.Run(ctx, chromedp.Evaluate[string](stateJS))
		cancel()
		if err == nil && slices.Contains(want, st) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// screenshot saves a full-page PNG under screenshotDir.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.fail("screenshot %s: %v", name, err)
	}
	require.NoError(b.t, os.MkdirAll(screenshotDir, 0o755))
	path := filepath.Join(screenshotDir, name)
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("waitpage: screenshot %s (%d bytes)", path, len(png))
}

// noHorizontalScroll checks that the page fits the viewport's width.
func (b *browser) noHorizontalScroll(where string) {
	b.t.Helper()
	w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`)
	if len(w) != 2 || w[0] > w[1] {
		b.fail("%s: page is wider than the viewport (scrollWidth, innerWidth) = %v", where, w)
	}
}

// policyViolations are console messages that say the page broke its
// Content-Security-Policy, or threw.
func (b *browser) policyViolations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var bad []string
	for _, m := range b.console {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
			bad = append(bad, m.String())
		}
	}
	return bad
}

// storedJS reads the localStorage value whose key ends with suffix.
func storedJS(suffix string) string {
	return fmt.Sprintf(`(function () { for (var i = 0; i < localStorage.length; i++) { var k = localStorage.key(i); if (k.endsWith(%q)) return localStorage.getItem(k); } return ""; })()`, suffix)
}

// checkSmallestSolution checks the page's proof of work: SHA-256 of
// nonce:solution has at least bits leading zero bits and no smaller number
// has.
func checkSmallestSolution(t *testing.T, nonce, solution string, want int) {
	t.Helper()
	n, err := strconv.ParseUint(solution, 10, 64)
	require.NoError(t, err, "solution %q", solution)
	require.Equal(t, strconv.FormatUint(n, 10), solution, "solution is not canonical decimal")
	zeros := func(s string) int {
		sum := sha256.Sum256([]byte(nonce + ":" + s))
		z := 0
		for _, c := range sum {
			if c != 0 {
				return z + bits.LeadingZeros8(c)
			}
			z += 8
		}
		return z
	}
	require.GreaterOrEqual(t, zeros(solution), want, "solution %s for nonce %s", solution, nonce)
	for i := uint64(0); i < n; i++ {
		require.Less(t, zeros(strconv.FormatUint(i, 10)), want, "%d is a smaller solution than %d", i, n)
	}
}

// fetchRecorder runs in the page before its own script (injected through
// the DevTools protocol, which the page's Content-Security-Policy does not
// govern) and records every fetch: when it started, when its answer arrived,
// its status, Retry-After and pollAfterMs.
const fetchRecorder = `(function () {
  var log = window.__flashlineFetches = [];
  var orig = window.fetch;
  window.fetch = function (input) {
    var e = { url: typeof input === "string" ? input : input.url, start: performance.now(), end: 0, status: 0, retryAfter: "", pollAfterMs: 0 };
    log.push(e);
    return orig.apply(this, arguments).then(function (resp) {
      e.end = performance.now();
      e.status = resp.status;
      e.retryAfter = resp.headers.get("Retry-After") || "";
      resp.clone().json().then(function (b) { if (b && typeof b.pollAfterMs === "number") e.pollAfterMs = b.pollAfterMs; }, function () {});
      return resp;
    }, function (err) { e.end = performance.now(); throw err; });
  };
})();`

type fetchEntry struct {
	URL         string  `json:"url"`
	Start       float64 `json:"start"`
	End         float64 `json:"end"`
	Status      int     `json:"status"`
	RetryAfter  string  `json:"retryAfter"`
	PollAfterMs float64 `json:"pollAfterMs"`
}

// checkPolling checks that the page asked for its ticket and status no
// faster than the server said: after an answer with pollAfterMs, the next
// request starts at least that long after the answer arrived; after a 429 or
// 503, at least Retry-After later. It returns how many status polls it saw.
func checkPolling(b *browser) int {
	b.t.Helper()
	var polls []fetchEntry
	for _, e := range eval[[]fetchEntry](b, `window.__flashlineFetches || []`) {
		if strings.Contains(e.URL, "/ticket") || strings.Contains(e.URL, "/status") {
			polls = append(polls, e)
		}
	}
	status := 0
	for i, e := range polls {
		if strings.Contains(e.URL, "/status") {
			status++
		}
		if i == 0 {
			continue
		}
		prev := polls[i-1]
		gap := e.Start - prev.End
		floor := 0.0
		switch {
		case prev.Status == http.StatusOK:
			floor = prev.PollAfterMs
		case prev.Status == http.StatusTooManyRequests || prev.Status == http.StatusServiceUnavailable:
			if s, err := strconv.Atoi(prev.RetryAfter); err == nil {
				floor = float64(s) * 1000
			}
		}
		if gap < floor-1 {
			b.fail("request %d (%s) came %.0f ms after the answer to the one before (status %d, pollAfterMs %.0f, Retry-After %q): faster than allowed",
				i, e.URL, gap, prev.Status, prev.PollAfterMs, prev.RetryAfter)
		}
	}
	return status
}

// funnel is what the page is driven through and what it is checked against.
type funnel struct {
	base, saleID, jwt string
	title             string // the product's name the page must show
	challengeBits     int
	// reservation reads GET /reservations/{id} as the customer.
	reservation func(t *testing.T, id string) (state, orderID string)
	// payment, when set, is a sale confirmed by payment: after Pay the page
	// must wait for the payment; payment then extends the hold (the page's
	// countdown must follow), and sends the payment provider's event.
	payment func(t *testing.T, reservationID string, step paymentStep)
}

// paymentStep is what funnel.payment is asked to do.
type paymentStep int

const (
	extendHold  paymentStep = iota // the store extends every hold of the sale
	sendPayment                    // the provider's payment.succeeded event
)

// drive opens the waiting-room page with the customer's token in the fragment
// and buys one unit: waiting (screenshot), admitted, reserved, a reload that
// must show the same reservation with the same Idempotency-Key, pay, paid
// (screenshot). It returns the reservation and order the page showed.
func drive(t *testing.T, b *browser, f funnel) (reservationID, orderID string) {
	t.Helper()
	b.do("record fetches", 10*time.Second, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fetchRecorder})
		return chromedp.Void{}, err
	})
	b.do("open the waiting room", 30*time.Second,
		chromedp.Navigate(f.base+"/sales/"+f.saleID+"/wait#token="+f.jwt))
	b.adoptLinkToken()

	// Waiting: the sale opens a few seconds from now.
	b.waitState(30*time.Second, "waiting")
	loc := eval[string](b, `location.href`)
	if strings.Contains(loc, "token=") {
		b.fail("the token is still in the address bar: %s", loc)
	}
	if got := eval[string](b, `document.getElementById("product-title").textContent`); got != f.title {
		b.fail("the page shows the product %q, want %q", got, f.title)
	}
	position := eval[string](b, `document.getElementById("position").textContent`)
	if !regexp.MustCompile(`^\d[\d,.\s]*$`).MatchString(position) {
		b.fail("waiting without a position: %q", position)
	}
	b.noHorizontalScroll("waiting")
	// Let a quick proof of work finish so the picture shows the settled
	// waiting state (best effort: the page may be admitted first).
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if eval[bool](b, `document.getElementById("challenge").hidden`) {
			break
		}
	}
	b.screenshot("waiting.png")

	// Admitted, then reserved.
	b.waitState(90*time.Second, "reserved")
	reservationID = eval[string](b, `document.getElementById("reservation-id").textContent`)
	idemKey := eval[string](b, storedJS(".idempotencyKey"))
	if reservationID == "" || idemKey == "" {
		b.fail("reserved without a reservation id (%q) or idempotency key (%q)", reservationID, idemKey)
	}
	countdown := eval[string](b, `document.getElementById("countdown").textContent`)
	if !regexp.MustCompile(`^\d+(:\d\d)+$`).MatchString(countdown) {
		b.fail("countdown shows %q", countdown)
	}
	if f.challengeBits > 0 {
		var pow struct{ Nonce, Solution string }
		if err := json.Unmarshal([]byte(eval[string](b, storedJS(".pow"))), &pow); err != nil {
			b.fail("no proof-of-work solution kept by the page: %v", err)
		}
		checkSmallestSolution(t, pow.Nonce, pow.Solution, f.challengeBits)
	}
	state, _ := f.reservation(t, reservationID)
	require.Equal(t, "pending", state, "reservation %s before paying", reservationID)
	b.noHorizontalScroll("reserved")
	b.screenshot("reserved.png")
	if n := checkPolling(b); n == 0 {
		b.fail("reserved without a single status poll")
	}

	// A reload in the reserved state shows the same reservation, and the
	// page still holds the same Idempotency-Key.
	b.do("reload", 30*time.Second, chromedp.Reload())
	b.waitState(30*time.Second, "reserved")
	if got := eval[string](b, `document.getElementById("reservation-id").textContent`); got != reservationID {
		b.fail("after reload the page shows reservation %q, want %q", got, reservationID)
	}
	if got := eval[string](b, storedJS(".idempotencyKey")); got != idemKey {
		b.fail("after reload the Idempotency-Key is %q, want %q", got, idemKey)
	}

	// Pay.
	b.do("click #pay", 10*time.Second, chromedp.Click(chromedp.ID("pay")))
	if f.payment != nil {
		// The payment confirms the hold, not the page: it says it waits.
		b.waitState(30*time.Second, "awaiting_payment")
		status := eval[string](b, `document.getElementById("status-text").textContent`)
		if !strings.Contains(strings.ToLower(status), "waiting for payment") {
			b.fail("awaiting payment, the status line says %q", status)
		}
		if eval[bool](b, `document.getElementById("pay-waiting").hidden`) || !eval[bool](b, `document.getElementById("pay").disabled`) {
			b.fail("awaiting payment without the waiting note, or with Pay still enabled")
		}
		b.noHorizontalScroll("awaiting payment")
		b.screenshot("awaiting-payment.png")

		// Payment is slow: the store extends the holds; the countdown follows.
		before := eval[string](b, `document.getElementById("expires-at").dateTime`)
		f.payment(t, reservationID, extendHold)
		deadline := time.Now().Add(15 * time.Second)
		for eval[string](b, `document.getElementById("expires-at").dateTime`) == before {
			if time.Now().After(deadline) {
				b.fail("the page still shows the hold until %s after the store extended it", before)
			}
			time.Sleep(200 * time.Millisecond)
		}
		after := eval[string](b, `document.getElementById("expires-at").dateTime`)
		b0, err0 := time.Parse(time.RFC3339, before)
		a0, err1 := time.Parse(time.RFC3339, after)
		if err0 != nil || err1 != nil || !a0.After(b0) {
			b.fail("the hold's end moved from %q to %q", before, after)
		}
		if st := eval[string](b, stateJS); st != "awaiting_payment" {
			b.fail("after the extension the page is in state %q", st)
		}

		f.payment(t, reservationID, sendPayment)
	}
	b.waitState(30*time.Second, "paid")
	orderID = eval[string](b, `document.getElementById("order-id").textContent`)
	if orderID == "" {
		b.fail("paid without an order id")
	}
	b.noHorizontalScroll("paid")
	b.screenshot("paid.png")

	state, apiOrder := f.reservation(t, reservationID)
	require.Equal(t, "confirmed", state, "reservation %s after paying", reservationID)
	if apiOrder != "" {
		require.Equal(t, apiOrder, orderID, "order id: API vs page")
	}

	// Still one column at 360 px.
	b.do("narrow the viewport", 10*time.Second,
		chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	b.noHorizontalScroll("paid at 360 px")

	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
	return reservationID, orderID
}

// ---- against a real `flashline serve` ----

func TestMain(m *testing.M) { testserver.Main(m) }

func TestWaitPageBuysThroughWaitingRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	const bitsAsked = 8
	opensAt := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_wait","initialStock":3,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room","fairness":"randomized_at_open",`+
		`"challengeBits":%d,"confirmation":"customer"}`, opensAt, bitsAsked))
	jwt := testserver.Token(t, "browser-customer")

	reservationID, orderID := drive(t, b, funnel{
		base: srv.URL, saleID: saleID, jwt: jwt, title: "sku_wait", challengeBits: bitsAsked,
		reservation: func(t *testing.T, id string) (string, string) {
			t.Helper()
			r, err := c.Do(context.Background(), http.MethodGet, srv.URL+"/reservations/"+id, jwt, "")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, r.Status, "GET /reservations/%s: %s", id, r.Body)
			var v struct{ State, OrderID string }
			require.NoError(t, json.Unmarshal(r.Body, &v))
			return v.State, v.OrderID
		},
	})
	t.Logf("waitpage: reservation %s paid as order %s", reservationID, orderID)

	// The sale counts it.
	r, err := c.Do(context.Background(), http.MethodGet, srv.URL+"/admin/sales/"+saleID, testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var sale struct{ Confirmed, Pending int }
	require.NoError(t, json.Unmarshal(r.Body, &sale))
	require.Equal(t, 1, sale.Confirmed, "sale %s", r.Body)
	require.Equal(t, 0, sale.Pending, "sale %s", r.Body)
}

// TestWaitPageWaitsForPayment: in a sale confirmed by payment (the default),
// the page's Pay step shows that it waits for the payment, follows the
// countdown when the store extends the hold, and shows the order once the
// payment provider's signed event has confirmed it.
func TestWaitPageWaitsForPayment(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	opensAt := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_pay","title":"Pay-later boots","initialStock":3,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room","fairness":"arrival_order"}`, opensAt))
	jwt := testserver.Token(t, "browser-payer")
	api := c.To(srv.URL)

	reservationID, orderID := drive(t, b, funnel{
		base: srv.URL, saleID: saleID, jwt: jwt, title: "Pay-later boots",
		reservation: func(t *testing.T, id string) (string, string) {
			t.Helper()
			r, err := api.Reservation(context.Background(), jwt, id)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, r.Status, "GET /reservations/%s: %s", id, r.Body)
			return string(r.Value.State), r.Value.OrderID
		},
		payment: func(t *testing.T, id string, step paymentStep) {
			t.Helper()
			ctx := context.Background()
			switch step {
			case extendHold:
				r, err := api.ExtendSale(ctx, testserver.AdminToken, saleID, 300, "browser-test")
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				require.Equal(t, 1, r.Value.Extended)
			case sendPayment:
				amount := int64(12900)
				r, err := api.SendPaymentEvent(ctx, time.Now(), client.PaymentEvent{
					ID: "evt_browser_1", Type: "payment.succeeded",
					Data: client.PaymentData{ReservationID: id, PaymentReference: "pi_browser_1", Amount: &amount, Currency: "EUR"},
				}, testserver.PaymentSecret)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				require.Equal(t, "confirmed", r.Value.Outcome)
			}
		},
	})
	t.Logf("waitpage: reservation %s paid by the provider's event as order %s", reservationID, orderID)
	sale, err := api.Sale(context.Background(), testserver.AdminToken, saleID)
	require.NoError(t, err)
	require.Equal(t, 1, sale.Value.Confirmed, "sale %s", sale.Body)
	require.Equal(t, "payment", sale.Value.Confirmation)
}

// TestWaitPageAsksBeforeSwitchingAccount: a link carrying a token
// (#token=…) is never taken silently: with another token kept, the page
// asks, and only "switch" stores the link's token; with none kept (or an
// expired one), it asks too (issue 44: a link must not make a visitor queue
// and buy as someone else), and "sign in with my own" stores nothing. The
// same token as the one kept is nothing to ask.
func TestWaitPageAsksBeforeSwitchingAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	// Open in an hour: every customer just waits, with no proof of work.
	opensAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_switch","initialStock":3,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room","fairness":"randomized_at_open"}`, opensAt))
	alice := testserver.Token(t, "alice")
	mallory := testserver.Token(t, "mallory")
	waitURL := srv.URL + "/sales/" + saleID + "/wait"
	jwtJS := fmt.Sprintf(`localStorage.getItem(%q) || ""`, "flashline.jwt."+saleID)
	text := func(id string) string {
		t.Helper()
		return eval[string](b, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
	}

	// open loads the page with token in the fragment. It goes through
	// about:blank: from the page itself, only the fragment would change,
	// which is no new load.
	open := func(token string) {
		t.Helper()
		b.do("open the waiting room with a token", 30*time.Second,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(waitURL+"#token="+token))
		if loc := eval[string](b, `location.href`); loc != waitURL {
			b.fail("the address bar shows %s, want %s (no token)", loc, waitURL)
		}
	}
	// waitingAs checks that the page went on, as sub, with jwt stored.
	waitingAs := func(sub, jwt string) {
		t.Helper()
		b.waitState(30*time.Second, "waiting")
		if got := eval[string](b, jwtJS); got != jwt {
			b.fail("the stored token is not %s's", sub)
		}
		if got := text("account-id"); got != sub {
			b.fail("the page shows account %q, want %q", got, sub)
		}
	}
	// asked checks the choice the page offers while alice's token is kept.
	asked := func() {
		t.Helper()
		b.waitState(30*time.Second, "choose_account")
		if got := eval[string](b, jwtJS); got != alice {
			b.fail("the link's token replaced the stored one before the customer chose")
		}
		if cur, link := text("account-current"), text("account-link"); cur != "alice" || link != "mallory" {
			b.fail("the choice shows current %q and link %q, want alice and mallory", cur, link)
		}
		if n := eval[int](b, `document.querySelectorAll("#state-choose_account:not([hidden]) button").length`); n != 2 {
			b.fail("the choice has %d visible buttons, want 2", n)
		}
	}

	// Nothing stored: the page asks; "my own account" stores nothing and
	// asks to sign in, "continue" takes the link's token.
	open(alice)
	askedFresh := func(link string) {
		t.Helper()
		b.waitState(30*time.Second, "choose_account")
		if got := eval[string](b, jwtJS); got != "" {
			b.fail("the link's token was stored before the customer chose")
		}
		if cur, l := text("account-current"), text("account-link"); cur != "(no account on this device)" || l != link {
			b.fail("the choice shows current %q and link %q, want none and %s", cur, l, link)
		}
	}
	askedFresh("alice")
	b.screenshot("choose-link-account.png")
	b.do("sign in with my own account", 10*time.Second, chromedp.Click(chromedp.ID("account-keep")))
	b.waitState(30*time.Second, "signin")
	if got := eval[string](b, jwtJS); got != "" {
		b.fail("refused the link's account, but its token was stored")
	}
	open(alice)
	askedFresh("alice")
	b.do("continue with the link's account", 10*time.Second, chromedp.Click(chromedp.ID("account-switch")))
	waitingAs("alice", alice)

	// Another account's token: the page asks; "keep" keeps alice.
	open(mallory)
	asked()
	b.noHorizontalScroll("choose account")
	b.screenshot("choose-account.png")
	b.do("keep the current account", 10*time.Second, chromedp.Click(chromedp.ID("account-keep")))
	waitingAs("alice", alice)
	if got := eval[string](b, storedJS(".mallory.ticket")); got != "" {
		b.fail("kept alice, but a ticket was taken for mallory")
	}

	// The same token again: nothing to ask.
	open(alice)
	waitingAs("alice", alice)

	// Another account's token again: "switch" stores it.
	open(mallory)
	asked()
	b.do("switch to the link's account", 10*time.Second, chromedp.Click(chromedp.ID("account-switch")))
	waitingAs("mallory", mallory)
	if got := eval[string](b, storedJS(".mallory.ticket")); got == "" {
		b.fail("switched to mallory, but no ticket was taken for mallory")
	}

	// An expired stored token is as none: the page asks about the link's.
	expired, err := auth.Mint(testserver.JWTSecret, "mallory", -time.Hour, time.Time{})
	require.NoError(t, err)
	eval[bool](b, fmt.Sprintf(`localStorage.setItem(%q, %q), true`, "flashline.jwt."+saleID, expired))
	open(alice)
	b.waitState(30*time.Second, "choose_account")
	if cur := text("account-current"); cur != "(no account on this device)" {
		b.fail("an expired token kept, the choice shows current %q", cur)
	}
	b.do("continue with the link's account", 10*time.Second, chromedp.Click(chromedp.ID("account-switch")))
	waitingAs("alice", alice)

	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
}
