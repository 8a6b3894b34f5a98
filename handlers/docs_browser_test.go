package handlers_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flashline/flashline/internal/testkit/testbrowser"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
)

// docsRecorder runs before the page's own scripts: it keeps every
// Content-Security-Policy violation the page meets.
const docsRecorder = `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});`

// docsState is what the browser test reads of the rendered page: the
// operations Swagger UI lists (method and path), every resource the page
// loaded, and the CSP violations.
const docsState = `JSON.stringify({
  rendered: document.getElementById("api-reference").dataset.rendered || "",
  operations: Array.from(document.querySelectorAll(".opblock")).map(function (el) {
    var m = el.querySelector(".opblock-summary-method"), p = el.querySelector(".opblock-summary-path");
    return (m ? m.textContent.trim() : "") + " " + (p ? p.textContent.replace(/\u200b/g, "").trim() : "");
  }),
  resources: performance.getEntriesByType("resource").map(function (e) { return e.name; }),
  violations: window.__csp || [],
  origin: location.origin
})`

type docsView struct {
	Rendered   string   `json:"rendered"`
	Operations []string `json:"operations"`
	Resources  []string `json:"resources"`
	Violations []string `json:"violations"`
	Origin     string   `json:"origin"`
}

// TestDocsPageRenders: in headless Chromium, /docs lists every operation of
// the document, loads nothing from another origin and meets no violation of
// its Content-Security-Policy.
func TestDocsPageRenders(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped under -short")
	}
	t.Parallel()
	srv := docsServer(t)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI(), &doc))
	var want []string
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				want = append(want, strings.ToUpper(method)+" "+path)
			}
		}
	}

	ctx := docsBrowser(t)
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: docsRecorder})
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		console []chromedp.ConsoleMessage
	)
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, m)
			mu.Unlock()
		}
	}()
	// Bounds for a browser that hangs, not a measure of speed: on a loaded
	// machine Chromium may take many seconds to run a 1.7 MB script.
	const bound = 2 * time.Minute
	nav, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	require.NoError(t, chromedp.Do(nav, chromedp.Navigate(srv.URL+"/docs")))

	var view docsView
	deadline := time.Now().Add(bound)
	for {
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		state, err := chromedp.Run(ectx, chromedp.Evaluate[string](docsState))
		cancel()
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(state), &view))
		if view.Rendered == "true" && len(view.Operations) >= len(want) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the page did not list the operations within %s: %+v", bound, view)
		time.Sleep(200 * time.Millisecond)
	}
	// An operation with two tags is listed under each.
	listed := slices.Compact(slices.Sorted(slices.Values(view.Operations)))
	require.ElementsMatch(t, want, listed, "the operations the page lists are the document's")

	// One operation opened: its parameters, bodies and answers render too
	// (schemas, examples, highlighted JSON) within the policy.
	open, cancelOpen := context.WithTimeout(ctx, bound)
	defer cancelOpen()
	require.NoError(t, chromedp.Do(open,
		chromedp.Click(chromedp.CSS(`#operations-customers-reserve .opblock-summary-control`)),
		chromedp.WaitVisible(chromedp.CSS(`#operations-customers-reserve .responses-table`)),
	))
	opened, err := chromedp.Run(open, chromedp.Evaluate[string](`document.querySelector("#operations-customers-reserve").innerText`))
	require.NoError(t, err)
	require.Contains(t, opened, "Idempotency-Key")
	require.Contains(t, opened, "sold_out")
	state, err := chromedp.Run(open, chromedp.Evaluate[string](docsState))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(state), &view))
	require.Empty(t, view.Violations, "Content-Security-Policy violations")
	require.NotEmpty(t, view.Resources)
	for _, r := range view.Resources {
		require.True(t, strings.HasPrefix(r, view.Origin+"/"), "a request to another origin: %s", r)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := filepath.Join("..", "screenshots", "docs")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "docs.png"), shot, 0o644))

	// Nothing the page wrote to the console was an error or an exception
	// (a blocked request or a violation shows there too).
	mu.Lock()
	defer mu.Unlock()
	for _, m := range console {
		require.NotContains(t, []chromedp.ConsoleType{chromedp.ConsoleError, chromedp.ConsoleException}, m.Type, "console: %s (%s)", m, m.URL)
	}
}

// docsBrowser starts a headless Chromium for the test (make chromium, which
// make test runs first, provides one).
func docsBrowser(t *testing.T) context.Context {
	t.Helper()
	return testbrowser.Start(t, 1280, 900, chromedp.EmulateViewport(1280, 900))
}
