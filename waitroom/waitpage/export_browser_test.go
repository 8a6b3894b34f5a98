package waitpage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom/waitpage"
)

// edgeMode is what the stand-in for the API's host does with a request.
type edgeMode int32

const (
	edgeDown  edgeMode = iota // the connection is closed unanswered
	edgeUp                    // passed on to flashline serve
	edgeStale                 // passed on, and every "waiting" status says stale: true
)

// seenRequest is one request the page sent to the API.
type seenRequest struct {
	at        time.Time
	method    string
	path      string
	admission string // X-Admission-Token
	mode      edgeMode
}

// edge stands between the exported page and flashline serve, on another
// origin than the page's: down, it closes every connection unanswered (as a
// host that is gone); up, it passes requests on; stale, it also marks every
// "waiting" status as stale, as an edge that lost its origin does. It
// records every request.
type edge struct {
	srv  *httptest.Server
	mode atomic.Int32

	mu   sync.Mutex
	seen []seenRequest
}

func newEdge(t *testing.T, origin string) *edge {
	t.Helper()
	target, err := url.Parse(origin)
	require.NoError(t, err)
	e := &edge{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if edgeMode(e.mode.Load()) != edgeStale || !strings.HasSuffix(resp.Request.URL.Path, "/status") || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var v map[string]any
		if json.Unmarshal(body, &v) == nil && v["state"] == "waiting" {
			v["stale"] = true
			body, _ = json.Marshal(v)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode := edgeMode(e.mode.Load())
		e.mu.Lock()
		e.seen = append(e.seen, seenRequest{at: time.Now(), method: r.Method, path: r.URL.Path, admission: r.Header.Get("X-Admission-Token"), mode: mode})
		e.mu.Unlock()
		if mode == edgeDown {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if strings.HasSuffix(r.URL.Path, "/status/stream") {
			// This stand-in marks polls stale, not streams: it refuses
			// streams as an instance past its --max-streams does, and the
			// page polls (streams through real edges:
			// TestExportedPageThroughAnEdge).
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"overloaded","message":"no streams here"}}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *edge) set(m edgeMode) { e.mode.Store(int32(m)) }

func (e *edge) requests() []seenRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]seenRequest(nil), e.seen...)
}

// TestExportedPage drives the page exported as static files, served by a
// plain file server on one origin, against flashline serve on another
// (cross-origin, through CORS): while the API cannot be reached the page
// says "come back shortly" and tries again with growing waits; once it can,
// the page shows the product and a countdown to the open in the shopper's
// time zone, waits in line (an edge that says stale sends it back to "come
// back shortly", never further), and after the open solves the challenge in
// its worker (loaded from the static host), is admitted, reserves and pays.
// It never calls the reserve endpoint without an admission token.
func TestExportedPage(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	const title = "Trail runner — limited édition"
	opens := time.Now().Add(40 * time.Second).UTC().Truncate(time.Second)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_export","title":%q,"imageUrl":"https://127.0.0.1:9/shoe.png",`+
		`"initialStock":3,"perCustomerLimit":1,"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room",`+
		`"fairness":"arrival_order","challengeBits":8,"confirmation":"customer"}`, title, opens.Format(time.RFC3339)))
	jwt := testserver.Token(t, "exported-page-customer")

	e := newEdge(t, srv.URL)
	dir := t.TempDir()
	_, err := waitpage.Export(dir, saleID, e.srv.URL, false)
	require.NoError(t, err)
	static := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(static.Close)

	const zone = "America/New_York"
	b.do("time zone", 10*time.Second, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
		return chromedp.Void{}, err
	})
	text := func(id string) string {
		t.Helper()
		return eval[string](b, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
	}
	hidden := func(id string) bool {
		t.Helper()
		return eval[bool](b, fmt.Sprintf(`document.getElementById(%q).hidden`, id))
	}

	// (1) The API cannot be reached: come back shortly, retrying with
	// growing waits.
	b.do("open the exported page", 30*time.Second, chromedp.Navigate(static.URL+"/#token="+jwt))
	b.adoptLinkToken()
	b.waitState(15*time.Second, "unreachable")
	if got := text("state-unreachable"); !strings.Contains(got, "Come back shortly") {
		b.fail("unreachable, the page says %q", got)
	}
	time.Sleep(8 * time.Second)
	b.screenshot("exported-unreachable.png")
	var downAt []time.Time
	for _, r := range e.requests() {
		if r.mode == edgeDown {
			downAt = append(downAt, r.at)
		}
	}
	if len(downAt) < 3 || len(downAt) > 8 {
		b.fail("%d requests in the first 8 s with the API unreachable: want 3-8 (retries with backoff)", len(downAt))
	}
	for i := 1; i < len(downAt); i++ {
		// The k-th wait (comeBackMs) is a half to the whole of 2^k s:
		// never shorter than 2^(k-1) s, whatever its jitter. A request is
		// sent only once the one before has failed and its wait has run,
		// and a busy machine only makes both later, so each gap is at
		// least its wait's floor, and the floors double: the page backs
		// off. (Comparing a gap with the one before it was not sound: a
		// first failure noticed late made the next gap look shorter.)
		floor := min(15*time.Second, 500*time.Millisecond<<(i-1))
		if gap := downAt[i].Sub(downAt[i-1]); gap < floor-20*time.Millisecond {
			b.fail("retry %d came %s after the one before: want at least %s (backing off)", i, gap, floor)
		}
	}
	if st := eval[string](b, stateJS); st != "unreachable" {
		b.fail("still unreachable, the page is in state %q", st)
	}

	// (2) The API answers: the product, the opening time in the shopper's
	// zone with a countdown, and a place in line.
	e.set(edgeUp)
	b.waitState(40*time.Second, "waiting")
	if got := text("product-title"); got != title {
		b.fail("the page shows the title %q, want %q", got, title)
	}
	if got := eval[string](b, `document.title`); !strings.HasPrefix(got, title) {
		b.fail("the document's title is %q", got)
	}
	if got := eval[string](b, `document.getElementById("product-image").getAttribute("src") || ""`); got != "https://127.0.0.1:9/shoe.png" {
		b.fail("the product image's src is %q", got)
	}
	if hidden("opens") || hidden("opens-countdown") {
		b.fail("the opening time or its countdown is hidden before the open")
	}
	if got := text("opens-zone"); !strings.Contains(got, zone) {
		b.fail("the opening time's zone says %q, want %s", got, zone)
	}
	wantLocal := opens.In(mustZone(t, zone))
	openingText := text("opens-at")
	if !strings.Contains(openingText, strconv.Itoa(wantLocal.Day())) || !strings.Contains(openingText, "Eastern") {
		b.fail("the opening time reads %q, want the day %d in Eastern time", openingText, wantLocal.Day())
	}
	left1 := text("opens-left")
	if !regexp.MustCompile(`^\d+(:\d\d)+$`).MatchString(left1) {
		b.fail("the countdown to the open shows %q", left1)
	}
	time.Sleep(2100 * time.Millisecond)
	if left2 := text("opens-left"); left2 == left1 {
		b.fail("the countdown to the open stands still at %q", left1)
	}
	b.noHorizontalScroll("exported, waiting")
	b.screenshot("exported-waiting.png")

	// An edge that lost its origin marks its answers stale: come back
	// shortly, though the edge answers; then back in line.
	e.set(edgeStale)
	b.waitState(20*time.Second, "unreachable")
	e.set(edgeUp)
	b.waitState(40*time.Second, "waiting")
	if time.Now().After(opens) {
		t.Logf("waitpage: the sale opened before the line was seen again (slow machine)")
	}

	// After the open: admitted, reserved, paid.
	b.waitState(90*time.Second, "reserved")
	reservationID := text("reservation-id")
	if eval[string](b, storedJS(".pow")) == "" {
		b.fail("reserved without the proof of work solved in the exported page's worker")
	}
	b.do("click #pay", 10*time.Second, chromedp.Click(chromedp.ID("pay")))
	b.waitState(30*time.Second, "paid")
	r, err := c.Do(context.Background(), http.MethodGet, srv.URL+"/reservations/"+reservationID, jwt, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), `"state":"confirmed"`)

	// Never the purchase path without an admission token.
	reserves := 0
	for _, r := range e.requests() {
		if r.method == http.MethodPost && strings.HasSuffix(r.path, "/reservations") {
			reserves++
			if r.admission == "" {
				b.fail("the page called %s %s without an admission token", r.method, r.path)
			}
		}
	}
	require.Positive(t, reserves, "the page reserved through the edge")
	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}
