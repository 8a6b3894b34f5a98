package handlers

import (
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/assets"
)

// The store's console: the admin's pages in a browser signed in at
// /admin/login (session.go). GET /admin/ lists the sales and has the form
// that creates one; GET /admin/sales/{saleId} is the sale's live page when a
// browser asks for HTML, the JSON view otherwise; .../report is the report
// after the sale. The pages are rendered here; their script (console.js)
// polls the live snapshot (live.go) and calls the admin API's own routes
// for every action, so the console can do nothing the API cannot. The chart
// is uPlot 1.6.32 (MIT), embedded with its licence (console/README.md).
//
//go:embed console/*.html
var consolePages embed.FS

//go:embed console/console.js console/console.css console/uPlot.iife.min.js console/uPlot.min.css console/uPlot.LICENSE
var consoleAssets embed.FS

// ConsolePrefix is where the console's scripts and styles are served.
const ConsolePrefix = "/admin/console/"

// ConsoleContentSecurityPolicy is sent with the console's pages: scripts,
// styles and requests from this origin only, no inline script, nothing
// framed or framing. uPlot sizes its canvas through the DOM (allowed).
const ConsoleContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// maxListed bounds the sales the console's list shows (the newest).
const maxListed = 100

var consoleTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"deref2": func(f *float64) float64 { return *f },
}).ParseFS(consolePages, "console/*.html"))

// wantsHTML says whether the caller is a browser asking for a page.
func wantsHTML(c *gin.Context) bool {
	return strings.Contains(c.GetHeader("Accept"), "text/html")
}

func renderPage(c *gin.Context, name string, data any) {
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Header("Content-Security-Policy", ConsoleContentSecurityPolicy)
	c.Header("X-Content-Type-Options", "nosniff")
	c.Set(outcomeKey, "ok")
	c.Status(http.StatusOK)
	_ = consoleTemplates.ExecuteTemplate(c.Writer, name, data)
}

// handleConsoleHome is GET /admin/: the sales, newest first, and the form
// that creates one.
func handleConsoleHome(store flashline.Store, paymentsConfigured bool, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		list, err := listSales(c.Request.Context(), store, flashline.SaleQuery{Limit: maxListed})
		if err != nil {
			writeError(c, logger, err)
			return
		}
		renderPage(c, "home.html", map[string]any{"Sales": list.Sales, "Payments": paymentsConfigured, "Prefix": ConsolePrefix})
	}
}

// handleReport is GET /admin/sales/{saleId}/report: the page when a browser
// asks for HTML, the JSON otherwise.
func handleReport(store ConsoleStore, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		rep, err := store.Report(c.Request.Context(), c.Param("saleId"))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		v := NewReportView(rep)
		if wantsHTML(c) {
			renderPage(c, "report.html", map[string]any{"R": v, "Prefix": ConsolePrefix})
			return
		}
		writeJSON(c, http.StatusOK, v)
	}
}

// renderSalePage is the sale's live page: the frame its script fills from
// the live snapshot.
func renderSalePage(c *gin.Context, sale api.Sale, gateRebuild bool) {
	renderPage(c, "sale.html", map[string]any{"Sale": sale, "Prefix": ConsolePrefix, "GateRebuild": gateRebuild})
}

var consoleTypes = map[string]string{
	".js":      "text/javascript; charset=utf-8",
	".css":     "text/css; charset=utf-8",
	".LICENSE": "text/plain; charset=utf-8",
}

// consoleFiles are the console's script, styles and uPlot (no credentials:
// they are the same for everyone), revalidated on every use.
var consoleFiles = func() *assets.Set {
	files, err := assets.ReadDir(consoleAssets, "console", consoleTypes)
	if err != nil {
		panic("handlers: console: " + err.Error())
	}
	return assets.New(files, assets.Options{
		Policy:   assets.Revalidated,
		Header:   http.Header{"X-Content-Type-Options": {"nosniff"}},
		NotFound: func(c *gin.Context) { writeError(c, nil, flashline.ErrNotFound) },
	})
}()

// handleConsoleAsset is GET /admin/console/{file}: consoleFiles.
func handleConsoleAsset(c *gin.Context) { consoleFiles.Serve(c) }

// NewLiveView renders a sale's live snapshot.
func NewLiveView(w flashline.SaleWatch, rates api.LiveRates, history []api.LivePoint) api.Live {
	return api.Live{
		Sale: NewSaleView(w.Sale), At: w.At.UTC().Format(time.RFC3339Nano), Room: newCrowdView(w.Room),
		Rates: rates, Incidents: newIncidentViews(w.Incidents), Actions: newActionViews(w.Actions),
		History: history,
	}
}

func newCrowdView(r *flashline.RoomCrowd) *api.Crowd {
	if r == nil {
		return nil
	}
	v := &api.Crowd{
		Positions: r.Positions, Preopen: r.PreopenTickets, Waiting: r.Waiting(),
		AdmittedThrough: r.AdmittedThrough, AdmittedPerSec: r.PacePerSecond, Held: r.Held, Message: r.Message,
	}
	if r.PreopenCount != nil {
		v.Preopen, v.PreopenFrozen = *r.PreopenCount, true
	}
	return v
}

func newIncidentViews(in []flashline.IncidentNote) []api.Incident {
	out := make([]api.Incident, len(in))
	for i, n := range in {
		out[i] = api.Incident{IncidentID: n.ID, Kind: n.Kind, Detail: n.Detail, At: stamp(n.At)}
	}
	return out
}

func newActionViews(in []flashline.OperatorAction) []api.Action {
	out := make([]api.Action, len(in))
	for i, a := range in {
		out[i] = api.Action{Action: a.Action, Operator: a.Operator, Detail: a.Detail, ReservationID: a.ReservationID, Affected: a.Affected, At: stamp(a.At)}
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// NewReportView renders the report after a sale, with its timeline: made,
// opened, each sell-out, the incidents and every operator's action, in
// order.
func NewReportView(r flashline.SaleReport) api.Report {
	s := r.Sale
	v := api.Report{
		Sale: NewSaleView(s), At: stamp(r.At), Room: newCrowdView(r.Room),
		Reservations: r.Reservations, Customers: r.Customers,
		FirstReservation: timeString(r.FirstAt), LastReservation: timeString(r.LastAt),
		VoidedOrders: r.VoidedOrders, LatePayments: r.LatePayments, LateRefunded: r.LatePaymentsRefunded,
		Incidents: newIncidentViews(r.Incidents), Actions: newActionViews(r.Actions),
		SoldOutTimes: len(r.SoldOut), Queue: newQueueView(r.Room, r.Queue, r.At, nil),
	}
	type moment struct {
		at time.Time
		m  api.Moment
	}
	var line []moment
	add := func(at time.Time, event, by, note string) {
		line = append(line, moment{at, api.Moment{At: stamp(at), Event: event, By: by, Note: note}})
	}
	add(s.CreatedAt, "created", "", "")
	// A sale made with no opening time opened when it was made.
	opened := s.OpensAt
	if opened == nil && s.State != flashline.StateScheduled {
		opened = &s.CreatedAt
	}
	if opened != nil && !opened.After(r.At) {
		v.OpenedAt = timeString(opened)
		add(*opened, "opened", "", "")
	}
	for i, t := range r.SoldOut {
		note := ""
		if i > 0 {
			note = "again, after units came back"
		}
		add(t, "sold_out", "", note)
	}
	if len(r.SoldOut) > 0 {
		v.SoldOutAt = timeString(&r.SoldOut[0])
		if opened != nil {
			secs := r.SoldOut[0].Sub(*opened).Seconds()
			v.SecondsToSellOut = &secs
		}
	}
	for _, n := range r.Incidents {
		add(n.At, "incident", "", n.Kind+": "+n.Detail)
	}
	for _, a := range r.Actions {
		add(a.At, a.Action, a.Operator, a.Detail)
	}
	slices.SortStableFunc(line, func(a, b moment) int { return a.at.Compare(b.at) })
	v.Timeline = make([]api.Moment, len(line))
	for i, m := range line {
		v.Timeline[i] = m.m
	}
	return v
}

type repairRequest struct {
	Operator string `json:"operator"`
	Apply    bool   `json:"apply"`
}

// handleRepair is POST /admin/sales/{saleId}/repair ({operator, apply}):
// the repair plan of a paused sale whose stock does not add up, written
// with apply (`flashline sale repair`; postgres.Store.Repair).
func handleRepair(store ConsoleStore, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req repairRequest
		operator, ok := readOperated(c, logger, &req, &req.Operator, false)
		if !ok {
			return
		}
		plan, err := store.Repair(c.Request.Context(), c.Param("saleId"), operator, req.Apply)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		if req.Apply {
			logger.InfoContext(c.Request.Context(), "handlers: repair", "sale_id", plan.SaleID, "applied", plan.Applied, "operator", operator)
		}
		writeJSON(c, http.StatusOK, NewRepairView(plan))
	}
}

// NewRepairView renders a repair plan.
func NewRepairView(p flashline.RepairPlan) api.Repair {
	line := func(b flashline.RepairBucket) api.RepairBucket {
		return api.RepairBucket{Bucket: b.Bucket, Variant: b.Variant, Stock: b.Stock, Implied: b.Implied, Ledger: b.Ledger, Unrecorded: b.Unrecorded(), Correction: b.Correction()}
	}
	v := api.Repair{SaleID: p.SaleID, State: string(p.State), Needed: p.Needed(), Applied: p.Applied, Total: line(p.Total())}
	if p.Applied {
		v.Operator = p.Operator
	}
	v.Buckets = make([]api.RepairBucket, len(p.Buckets))
	for i, b := range p.Buckets {
		v.Buckets[i] = line(b)
	}
	for _, t := range p.VariantTotals() {
		v.Variants = append(v.Variants, line(t))
	}
	return v
}
