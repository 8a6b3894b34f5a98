package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testbrowser"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// consoleBrowser is one headless Chromium tab.
func consoleBrowser(t *testing.T) context.Context {
	t.Helper()
	return testbrowser.Start(t, 1200, 1400, chromedp.EmulateViewport(1200, 1400))
}

// TestConsoleInBrowser: in Chromium, against a real `flashline serve`, an
// operator signs in, is told in place what the API refuses in the create
// form, creates a waiting-room sale, watches its numbers move while buyers
// come through the room and reserve, pauses it (opening it then shows the
// API's refusal), resumes it, and reads the report; the state changes are
// recorded under the operator's name, as `flashline sale report` shows.
// FLASHLINE_CONSOLE_SCREENSHOT=file saves the sale's page as a PNG (the
// README's, docs/console.png).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test against flashline serve: skipped under -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL)
	ctx := consoleBrowser(t)
	// run runs actions, again if the page's DOM changed under them: on a
	// loaded machine chromedp may still hold the previous document's tree
	// when a query runs, and the browser answers for the node id it got
	// "No node with given id" or "Could not find node with given id"
	// (seen under make test), depending on the call.
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		var err error
		for range 4 {
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = chromedp.Do(c, actions...)
			cancel()
			if err == nil || !strings.Contains(err.Error(), "node with given id") {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		require.NoError(t, err, what)
	}
	eval := func(expr string) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v, err := chromedp.Run(c, chromedp.Evaluate[string](expr))
		require.NoError(t, err, expr)
		return v
	}
	// waitFor polls a JavaScript condition (a string: "" is false).
	waitFor := func(what, expr string, timeout time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(timeout)
		// A page still loading has not all its elements yet: not yet true.
		guarded := `(function(){try{return String((` + expr + `)||"")}catch(e){return ""}})()`
		for {
			if v := eval(guarded); v != "" {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("console: %s: not within %s\npage: %s", what, timeout, eval(`document.body ? document.body.innerText : ""`))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	textOf := func(id string) string {
		return eval(fmt.Sprintf(`(document.getElementById(%q)||{}).textContent||""`, id))
	}

	// Every violation of the pages' Content-Security-Policy is kept.
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) { window.__csp.push(e.violatedDirective + " " + e.blockedURI); });`})
	require.NoError(t, err)
	violations := func() string { return eval(`JSON.stringify(window.__csp || [])`) }

	// Not signed in: sent to the sign-in page; the token signs in.
	run("open the console", chromedp.Navigate(srv.URL+"/admin/"))
	waitFor("sent to sign in", `location.pathname === "/admin/login" ? "yes" : ""`, 15*time.Second)
	run("sign in", chromedp.SetValue(chromedp.ID("token"), testserver.AdminToken), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	waitFor("the console after sign-in", `location.pathname === "/admin/" && document.getElementById("create") ? "yes" : ""`, 15*time.Second)

	// The API's validation answer, in place.
	run("a sale with no stock", chromedp.SetValue(chromedp.CSS(`input[name=sku]`), "console-shoe"),
		chromedp.Click(chromedp.ID("create-submit")))
	msg := waitFor("the refusal shown", `(function(){var e=document.getElementById("create-error");return e.hidden?"":e.textContent})()`, 15*time.Second)
	require.Contains(t, msg, "invalid_request")
	require.Contains(t, msg, "initialStock")
	require.Equal(t, "yes", eval(`document.querySelector("input[name=initialStock]").classList.contains("invalid") ? "yes" : ""`))

	const stock = 12
	run("a waiting-room sale",
		chromedp.SetValue(chromedp.CSS(`input[name=initialStock]`), fmt.Sprint(stock)),
		chromedp.SetValue(chromedp.CSS(`input[name=title]`), "Console Runner 2"),
		chromedp.SetValue(chromedp.CSS(`select[name=admission]`), "waiting_room"),
		chromedp.SetValue(chromedp.CSS(`select[name=confirmation]`), "customer"),
		chromedp.SetValue(chromedp.CSS(`input[name=reservationTtlSeconds]`), "600"),
		chromedp.Click(chromedp.ID("create-submit")))
	path := waitFor("the sale's page", `location.pathname.startsWith("/admin/sales/") ? location.pathname : ""`, 15*time.Second)
	sale := strings.TrimPrefix(path, "/admin/sales/")
	waitFor("the live numbers", fmt.Sprintf(`document.getElementById("n-available").textContent === "%d" && document.querySelector("#chart canvas") ? "yes" : ""`, stock), 20*time.Second)
	require.Equal(t, "scheduled", textOf("state"), "a waiting-room sale with no opening time waits for the open")
	require.Equal(t, "false", eval(`String(document.getElementById("crowd-box").hidden)`))

	// Actions, confirmed, under the operator's name.
	act := func(action string) {
		t.Helper()
		run("click "+action, chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action=%q]`, action))))
		waitFor("the confirmation", `document.getElementById("confirm").hidden ? "" : "yes"`, 10*time.Second)
		run("confirm "+action, chromedp.Click(chromedp.ID("confirm-yes")))
	}
	run("no operator yet", chromedp.Click(chromedp.CSS(`button[data-action="pause"]`)))
	require.Contains(t, textOf("result"), "Name the operator first")
	run("name the operator", chromedp.SetValue(chromedp.ID("operator"), "ann"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("operator").dispatchEvent(new Event("change"))`))
	act("open")
	waitFor("open", `document.getElementById("state").textContent === "open" ? "yes" : ""`, 15*time.Second)

	// Buyers come through the waiting room and reserve, while the page
	// watches.
	const buyers = 8
	var wg sync.WaitGroup
	c := testserver.NewClient()
	for i := range buyers {
		wg.Go(func() { buyThroughRoom(t, c, srv.URL, sale, fmt.Sprintf("console-buyer-%d", i)) })
	}
	waitFor("the units move", fmt.Sprintf(`document.getElementById("n-pending").textContent === "%d" ? "yes" : ""`, buyers), 60*time.Second)
	wg.Wait()
	require.Equal(t, fmt.Sprint(stock-buyers), textOf("n-available"))
	waitFor("the crowd shown", `Number(document.getElementById("c-positions").textContent) >= 8 ? "yes" : ""`, 20*time.Second)
	waitFor("the chart's history", `document.querySelectorAll(".u-legend .u-series").length >= 6 ? "yes" : ""`, 10*time.Second)
	// The time axis reads clock time (HH:MM:SS), the chart's own formatter
	// of its ticks.
	waitFor("the axis in clock time", `(() => { const f = chart.axes[0].values; if (typeof f !== "function") return "";
		const s = f(chart, [Date.UTC(2026, 0, 1, 9, 5, 7) / 1000], 0, 0, 1).join(); const d = new Date(Date.UTC(2026, 0, 1, 9, 5, 7));
		const two = (n) => String(n).padStart(2, "0");
		return s === two(d.getHours()) + ":" + two(d.getMinutes()) + ":07" ? "yes" : ""; })()`, 10*time.Second)

	act("pause")
	waitFor("paused", `document.getElementById("state").textContent === "paused" ? "yes" : ""`, 15*time.Second)
	act("open") // a paused sale resumes; it is not opened
	waitFor("the refusal shown", `document.getElementById("result").textContent.includes("refused: invalid_transition") ? "yes" : ""`, 15*time.Second)
	require.Equal(t, "[]", violations(), "the sale's page breaks none of its Content-Security-Policy")
	act("resume")
	waitFor("open again", `document.getElementById("state").textContent === "open" ? "yes" : ""`, 15*time.Second)
	waitFor("the audit shown", `document.getElementById("actions").textContent.includes("ann: resume") ? "yes" : ""`, 15*time.Second)
	// The picture (docs/console.png) of the sale selling again: nothing
	// refused in it.
	if out := os.Getenv("FLASHLINE_CONSOLE_SCREENSHOT"); out != "" {
		time.Sleep(2 * time.Second) // the chart's next points
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, png, 0o644))
	}

	// The report, in the browser and from the CLI.
	run("the report", chromedp.Navigate(srv.URL+"/admin/sales/"+sale+"/report"))
	timeline := waitFor("the timeline", `(document.getElementById("timeline")||{}).textContent||""`, 15*time.Second)
	for _, want := range []string{"created", "opened", "pause", "resume", "ann"} {
		require.Contains(t, timeline, want)
	}
	require.Contains(t, textOf("reservations"), fmt.Sprintf("%d by %d customers", buyers, buyers))
	require.Equal(t, "[]", violations(), "nor does the report")

	out, _, err := runCLI(t, dbURL, "sale", "report", sale)
	require.NoError(t, err)
	require.Contains(t, out, "pause")
	require.Contains(t, out, "ann")
	out, _, err = runCLI(t, dbURL, "sale", "report", sale, "--csv")
	require.NoError(t, err)
	r := csv.NewReader(strings.NewReader(out))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	require.NoError(t, err)
	var events []string
	for _, row := range rows {
		if len(row) == 4 && row[0] != "at" {
			events = append(events, row[1]+" "+row[2])
		}
	}
	require.Contains(t, events, "pause ann")
	require.Contains(t, events, "resume ann")

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM operator_actions WHERE sale_id = $1 AND operator = 'ann' AND action IN ('open', 'pause', 'resume')`, sale).Scan(&n))
	require.Equal(t, 3, n, "the open, the pause and the resume, recorded under ann (the refused open: nothing)")
}

// buyThroughRoom takes a place in the sale's line, waits for admission and
// reserves one unit with the admission token.
func buyThroughRoom(t *testing.T, c *testserver.Client, base, sale, customer string) {
	ctx := context.Background()
	jwt := testserver.Token(t, customer)
	r, err := c.Do(ctx, http.MethodGet, base+"/sales/"+sale+"/ticket", jwt, "")
	if err != nil || r.Status != http.StatusOK {
		t.Errorf("ticket: %v %d %s", err, r.Status, r.Body)
		return
	}
	var ticket struct{ Token string }
	if err := json.Unmarshal(r.Body, &ticket); err != nil {
		t.Error(err)
		return
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r, err := c.Do(ctx, http.MethodGet, base+"/sales/"+sale+"/status?token="+url.QueryEscape(ticket.Token), jwt, "")
		if err != nil || r.Status != http.StatusOK {
			t.Errorf("status: %v %d %s", err, r.Status, r.Body)
			return
		}
		var st struct {
			State, AdmissionToken string
			PollAfterMs           int64
		}
		if err := json.Unmarshal(r.Body, &st); err != nil {
			t.Error(err)
			return
		}
		if st.State == "admitted" {
			r, err := c.Do(ctx, http.MethodPost, base+"/sales/"+sale+"/reservations", jwt, `{"quantity":1}`,
				"Idempotency-Key", customer, "X-Admission-Token", st.AdmissionToken, "Content-Type", "application/json")
			if err != nil || r.Status != http.StatusCreated {
				t.Errorf("reserve: %v %d %s", err, r.Status, r.Body)
			}
			return
		}
		time.Sleep(time.Duration(min(max(st.PollAfterMs, 100), 1000)) * time.Millisecond)
	}
	t.Errorf("%s: not admitted within 60 s", customer)
}
