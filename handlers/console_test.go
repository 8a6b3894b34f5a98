package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/postgres"
)

// consoleServer is the API with the console wired in, and a signed-in
// browser's cookie.
func consoleServer(t *testing.T) (*server, *prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := startServer(t, nil, func(d *handlers.Deps) {
		d.Console = d.Store.(*postgres.Store)
		d.Registry = reg
	})
	v, err := auth.NewVerifier(jwtSecret, adminToken)
	require.NoError(t, err)
	return s, reg, "__Host-flashline_admin=" + v.AdminSession(time.Now())
}

// TestConsolePages: a signed-in browser reaches the console's pages (HTML
// when it asks for it, the JSON view otherwise), one that is not is sent to
// the sign-in page, and a state change made from the console is recorded
// under the operator it names, in the live snapshot and the report.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	s, _, cookie := consoleServer(t)
	sale := s.createSale(t, `{"sku":"console-1","initialStock":5,"confirmation":"customer"}`)
	html := []string{"Accept", "text/html,application/xhtml+xml"}

	r := s.serve(t, http.MethodGet, "/admin", "", "", html...)
	require.Equal(t, http.StatusSeeOther, r.Status)
	require.Equal(t, "/admin/", r.Header.Get("Location"))
	r = s.serve(t, http.MethodGet, "/admin/", "", "", html...)
	require.Equal(t, http.StatusSeeOther, r.Status)
	require.Equal(t, "/admin/login", r.Header.Get("Location"))

	r = s.serve(t, http.MethodGet, "/admin/", "", "", append(html, "Cookie", cookie)...)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), sale.SaleID)
	require.Contains(t, string(r.Body), `<form id="create"`)
	require.NotEmpty(t, r.Header.Get("Content-Security-Policy"))

	r = s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID, "", "", append(html, "Cookie", cookie)...)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), `data-sale="`+sale.SaleID+`"`)
	// An open sale opened; only a scheduled one "opens at".
	require.Contains(t, string(r.Body), `<span id="opens-label">opened at</span>`)
	later := s.createSale(t, `{"sku":"console-later","initialStock":5,"opensAt":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	r = s.serve(t, http.MethodGet, "/admin/sales/"+later.SaleID, "", "", append(html, "Cookie", cookie)...)
	require.Contains(t, string(r.Body), `<span id="opens-label">opens at</span>`)
	r = s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID, "", "", append(html, "Cookie", cookie)...)
	r = s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID, "", "", "Cookie", cookie)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))

	// A change with the cookie needs the console's header, from a page of
	// this origin (a browser's fetch says so in Sec-Fetch-Site).
	r = s.serve(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/pause", "", `{"operator":"ann"}`, "Cookie", cookie, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusForbidden, r.Status)
	r = s.serve(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/pause", "", `{"operator":"ann"}`,
		"Cookie", cookie, "Content-Type", "application/json", "X-Flashline-Console", "1")
	require.Equal(t, http.StatusForbidden, r.Status)
	r = s.serve(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/pause", "", `{"operator":"ann"}`,
		"Cookie", cookie, "Content-Type", "application/json", "X-Flashline-Console", "1", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	// A bad operator is refused with the API's answer; the bearer token
	// works as before, with no body.
	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/resume", adminAuth, `{"operator":""}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/pause", adminAuth, `{"operator":"`+strings.Repeat("x", 200)+`"}`)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/pause", adminAuth, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	r = s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/live", "", "", "Cookie", cookie)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var live api.Live
	require.NoError(t, json.Unmarshal(r.Body, &live))
	require.Equal(t, "paused", live.Sale.State)
	require.Equal(t, 5, live.Sale.Available)
	require.Len(t, live.History, 1)
	var audit []string
	for _, a := range live.Actions {
		audit = append(audit, a.Action+" "+a.Operator)
	}
	require.Equal(t, []string{"pause admin", "resume admin", "pause ann"}, audit, "newest first")

	r = s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/repair", adminAuth, `{"operator":"ann"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var plan api.Repair
	require.NoError(t, json.Unmarshal(r.Body, &plan))
	require.False(t, plan.Needed)
	require.Equal(t, 5, plan.Total.Stock)

	r = s.do(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/report", adminAuth, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var rep api.Report
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	var events []string
	for _, m := range rep.Timeline {
		events = append(events, m.Event+" "+m.By)
	}
	require.Equal(t, []string{"created ", "opened ", "pause ann", "resume admin", "pause admin"}, events)
	require.Nil(t, rep.SoldOutAt)
	r = s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID+"/report", "", "", append(html, "Cookie", cookie)...)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), `id="timeline"`)

	for _, file := range []string{"console.js", "console.css", "uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"} {
		r = s.serve(t, http.MethodGet, handlers.ConsolePrefix+file, "", "")
		require.Equal(t, http.StatusOK, r.Status, file)
	}
	require.Equal(t, http.StatusNotFound, s.serve(t, http.MethodGet, handlers.ConsolePrefix+"nothing.js", "", "").Status)
}

// TestLiveSnapshotIsShared: fifty pages polling one sale's live snapshot as
// fast as they can cost one snapshot a second, counted twice: by the
// console's own counter and by the database's committed transactions
// (pg_stat_database, this test's database only; nothing else runs on it).
// CONSOLE_PAGES=n runs it with n pages instead (0, 1: the same count).
func TestLiveSnapshotIsShared(t *testing.T) {
	t.Parallel()
	s, reg, _ := consoleServer(t)
	sale := s.createSale(t, `{"sku":"console-2","initialStock":5,"confirmation":"customer"}`)
	ctx := t.Context()
	// Committed transactions of this test's database. A backend reports its
	// statistics when it goes idle, or up to ten seconds later: first every
	// idle connection of the pool is made to report now (each such call is
	// a transaction of its own, counted in flushes).
	xacts := func() (n, flushes int64) {
		conns := s.pool.AcquireAllIdle(ctx)
		for _, c := range conns {
			_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			require.NoError(t, err)
			c.Release()
		}
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
		return n, int64(len(conns))
	}
	snapshots := func() float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "flashline_console_snapshots_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	before, _ := xacts()
	snapBefore := snapshots()
	start := time.Now()
	pages, window := 50, 4*time.Second
	if n, err := strconv.Atoi(os.Getenv("CONSOLE_PAGES")); err == nil {
		pages = n
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	polls := 0
	for range pages {
		wg.Go(func() {
			for time.Since(start) < window {
				r, err := s.send(context.WithoutCancel(ctx), http.MethodGet, "/admin/sales/"+sale.SaleID+"/live", adminAuth, "")
				if err != nil || r.Status != http.StatusOK {
					t.Errorf("live: %v %d %s", err, r.Status, r.Body)
					return
				}
				mu.Lock()
				polls++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, flushes := xacts()
	snapAfter := snapshots()
	committed := after - before - flushes
	bound := elapsed.Seconds() + 1
	t.Logf("%d pages, %d polls in %s: %.0f snapshots, %d transactions committed",
		pages, polls, elapsed.Round(time.Millisecond), snapAfter-snapBefore, committed)
	require.Greater(t, polls, pages, "every page polled")
	require.LessOrEqual(t, snapAfter-snapBefore, bound, "at most one snapshot a second")
	// A snapshot is one read-only transaction; pgxpool pings a connection
	// idle for over a second before handing it out, and an empty query is
	// a transaction too: about two a snapshot, plus this test's own reads
	// of the count and what the statistics collector reports late (a few,
	// on a loaded machine). Whatever the pages open (1 or 50 measure the
	// same): never one a poll.
	require.LessOrEqual(t, float64(committed), 3*(snapAfter-snapBefore)+4, "transactions per snapshot")
	if pages >= 50 {
		require.Less(t, committed, int64(pages), "fewer transactions than pages, let alone polls")
	}
}

// TestConsoleGateVariantRows: the sale page of a gated sale with variants
// has a row per variant for its gate figures, in the sale's order, that the
// page's script fills from the live snapshot (here no gate answers: "–");
// a gated sale without variants has none.
func TestConsoleGateVariantRows(t *testing.T) {
	t.Parallel()
	s, _, cookie := consoleServer(t)
	html := []string{"Accept", "text/html,application/xhtml+xml", "Cookie", cookie}
	sale := s.createSale(t, `{"sku":"console-v","gate":"redis","confirmation":"customer","variants":[{"sku":"S","stock":5},{"sku":"M","stock":7}]}`)
	r := s.serve(t, http.MethodGet, "/admin/sales/"+sale.SaleID, "", "", html...)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	body := string(r.Body)
	require.Contains(t, body, `<table id="g-variants" class="list">`)
	s0 := strings.Index(body, `<tr data-sku="S"><th>S</th><td class="g-v-counter">–</td><td class="g-v-drift">–</td></tr>`)
	m := strings.Index(body, `<tr data-sku="M"><th>M</th><td class="g-v-counter">–</td><td class="g-v-drift">–</td></tr>`)
	require.True(t, s0 >= 0 && m > s0, "a row per variant, in order:\n%s", body)

	plain := s.createSale(t, `{"sku":"console-g","initialStock":5,"gate":"redis","confirmation":"customer"}`)
	r = s.serve(t, http.MethodGet, "/admin/sales/"+plain.SaleID, "", "", html...)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), `id="gate-box"`)
	require.NotContains(t, string(r.Body), `g-variants`)
}
