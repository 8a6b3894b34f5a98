package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// The sale's live page polls GET /admin/sales/{saleId}/live about once a
// second. Every page open on this instance reads the same snapshot: it is
// refreshed at most once per LiveInterval per sale, by whichever poll finds
// it stale (the others wait for that one read, then share its answer), so
// the database sees one read-only transaction (postgres.Store.Watch) per
// second per watched sale per instance, however many pages watch it. A
// gated sale's snapshot adds the gate's status (Redis, and the database's
// view of the units in flight).

// LiveInterval is how often a sale's snapshot may be read again.
const LiveInterval = time.Second

const (
	// maxWatched bounds the sales with a snapshot kept at once; a sale not
	// polled for watchIdle gives its place up.
	maxWatched = 64
	watchIdle  = time.Minute
	// historyPoints is how much of the counts' history a snapshot carries:
	// ten minutes at one point a second.
	historyPoints = 600
)

// ConsoleStore is what the console reads beyond the Store
// (*postgres.Store).
type ConsoleStore interface {
	// Watch reads the live page's snapshot of a sale, in one transaction.
	Watch(ctx context.Context, saleID string) (flashline.SaleWatch, error)
	// Report reads the report after a sale.
	Report(ctx context.Context, saleID string) (flashline.SaleReport, error)
	// Repair reads (and with apply writes) the repair of a paused sale's
	// stock, as `flashline sale repair` does.
	Repair(ctx context.Context, saleID, operator string, apply bool) (flashline.RepairPlan, error)
}

// GateStatuser reads a gated sale's counter and drift (*gate.Gate).
type GateStatuser interface {
	Status(ctx context.Context, saleID string) flashline.GateStatus
}

// watcher keeps the snapshots of the sales being watched on this instance.
type watcher struct {
	store    ConsoleStore
	gate     GateStatuser // nil: no gate on this instance
	gatherer prometheus.Gatherer
	now      func() time.Time
	// instance is this instance's name in the fleet's reports ("": it
	// reports none; fleet.go).
	instance string
	logger   *slog.Logger
	// refreshes counts the snapshots read (the test of the bound counts
	// them; /metrics shows them).
	refreshes prometheus.Counter

	mu    sync.Mutex
	sales map[string]*watched
}

// watched is one sale's snapshot: its encoded answer, and what the next
// refresh needs (the counters for the rates, the history).
type watched struct {
	mu       sync.Mutex // held for a refresh: the other polls wait for it
	read     time.Time  // when the snapshot was read (zero: never)
	body     []byte
	err      error
	viewed   time.Time
	counters map[string]float64
	history  []api.LivePoint
}

func newWatcher(store ConsoleStore, gate GateStatuser, reg *prometheus.Registry, now func() time.Time, instance string, logger *slog.Logger) *watcher {
	w := &watcher{store: store, gate: gate, now: now, instance: instance, logger: logger, sales: map[string]*watched{}}
	if reg != nil {
		w.gatherer = reg
		w.refreshes = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_console_snapshots_total",
			Help: "Snapshots of watched sales the console read from the database (at most one per second per sale, whatever the pages open).",
		})
		reg.MustRegister(w.refreshes)
	}
	return w
}

// instanceName is this instance's name on the live page.
func (w *watcher) instanceName() string {
	if w.instance == "" {
		return "this instance"
	}
	return w.instance
}

// entry returns saleID's entry, making a place for it if there is room.
func (w *watcher) entry(saleID string, now time.Time) (*watched, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.sales[saleID]
	if !ok {
		if len(w.sales) >= maxWatched {
			for id, other := range w.sales {
				if now.Sub(other.viewedAt()) > watchIdle {
					delete(w.sales, id)
				}
			}
		}
		if len(w.sales) >= maxWatched {
			return nil, fmt.Errorf("console: %d sales watched already: %w", maxWatched, flashline.ErrOverloaded)
		}
		e = &watched{}
		w.sales[saleID] = e
	}
	return e, nil
}

func (e *watched) viewedAt() time.Time {
	// viewed is written under e.mu; an entry being refreshed is not idle.
	if !e.mu.TryLock() {
		return time.Now()
	}
	defer e.mu.Unlock()
	return e.viewed
}

// snapshot is the encoded live answer of saleID, read again when it is
// older than LiveInterval.
func (w *watcher) snapshot(ctx context.Context, saleID string) ([]byte, error) {
	now := w.now()
	e, err := w.entry(saleID, now)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.viewed = now
	if !e.read.IsZero() && now.Sub(e.read) < LiveInterval {
		return e.body, e.err
	}
	e.body, e.err = w.refresh(ctx, saleID, e, now)
	e.read = w.now()
	return e.body, e.err
}

func (w *watcher) refresh(ctx context.Context, saleID string, e *watched, now time.Time) ([]byte, error) {
	if w.refreshes != nil {
		w.refreshes.Inc()
	}
	// The read is every waiting poll's, not only the one that makes it: a
	// poll that goes away does not cancel it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	snap, err := w.store.Watch(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if snap.Sale.Gate == flashline.GateRedis && w.gate != nil {
		st := w.gate.Status(ctx, saleID)
		snap.Sale.GateStatus = &st
	}
	counters := w.reservationOutcomes()
	var elapsed float64
	if !e.read.IsZero() {
		elapsed = now.Sub(e.read).Seconds()
	}
	// This instance's answers from its own metrics (fresh to the second),
	// the others' from what they last reported (fleet.go).
	var all []instanceAnswers
	if e.counters != nil && elapsed > 0 {
		all = append(all, instanceAnswers{name: w.instanceName(), this: true, seconds: elapsed, delta: outcomeDelta(e.counters, counters)})
	}
	all = append(all, otherInstances(w.instance, snap.Fleet, w.logger)...)
	rates, instances := fleetRates(all)
	e.counters = counters
	s := snap.Sale
	point := api.LivePoint{
		At: snap.At.UnixMilli(), Available: s.Available, Pending: s.Pending, Confirmed: s.Confirmed,
		Expired: s.Expired, Cancelled: s.Cancelled, Voided: s.Voided, Reserved: rates.Reserved,
	}
	for _, r := range rates.Refused {
		point.Refused += r
	}
	if len(e.history) >= historyPoints {
		e.history = append(e.history[:0], e.history[1:]...)
	}
	e.history = append(e.history, point)
	live := NewLiveView(snap, rates, e.history)
	live.Instances = instances
	live.Queue = newQueueView(snap.Room, snap.Queue, snap.At, w.logger)
	return json.Marshal(live)
}

// Keys of reservationOutcomes' map that are not outcomes: the purchase
// path's batches (count and reservations) and the reservation route's latency
// histogram (one key per bucket's upper bound).
const (
	keyBatches       = "\x00batches"
	keyBatchUnits    = "\x00batch_units"
	keyLatencyPrefix = "\x00le "
)

// reservationOutcomes reads this instance's count of reservation answers by
// outcome (ok, or an error code: sold_out, limit_reached, overloaded,
// rate_limited, ...) from its own metrics, with the answers given from
// memory (the sale cache's) that the HTTP counter also counts; and its
// batches and the route's latency buckets, for the batch size and the p99.
func (w *watcher) reservationOutcomes() map[string]float64 { return gatherOutcomes(w.gatherer) }

// gatherOutcomes is reservationOutcomes from g's metrics (nil: none).
func gatherOutcomes(g prometheus.Gatherer) map[string]float64 {
	out := map[string]float64{}
	if g == nil {
		return out
	}
	families, err := g.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		switch f.GetName() {
		case "flashline_http_requests_total":
			for _, m := range f.GetMetric() {
				if label(m, "route") == reservationsRoute {
					out[label(m, "outcome")] += m.GetCounter().GetValue()
				}
			}
		case "flashline_reserve_batch_size":
			for _, m := range f.GetMetric() {
				out[keyBatches] += float64(m.GetHistogram().GetSampleCount())
				out[keyBatchUnits] += m.GetHistogram().GetSampleSum()
			}
		case "flashline_http_request_duration_seconds":
			for _, m := range f.GetMetric() {
				if label(m, "route") != reservationsRoute {
					continue
				}
				for _, b := range m.GetHistogram().GetBucket() {
					out[keyLatencyPrefix+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] += float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// liveRates turns two readings of reservationOutcomes, elapsed seconds
// apart, into rates: answers per second by outcome, the mean batch (reservations a
// transaction), and the
// p99 of the reservation route's latency (the upper bound of the bucket it
// falls in; nil without answers, or past the last bound).
func liveRates(prev, now map[string]float64, elapsed float64) api.LiveRates {
	rates := api.LiveRates{Refused: map[string]float64{}}
	if elapsed <= 0 || prev == nil {
		return rates
	}
	type bucket struct{ le, n float64 }
	var buckets []bucket
	for key, n := range now {
		d := n - prev[key]
		switch {
		case key == keyBatches || key == keyBatchUnits:
		case strings.HasPrefix(key, keyLatencyPrefix):
			le, err := strconv.ParseFloat(strings.TrimPrefix(key, keyLatencyPrefix), 64)
			if err == nil {
				buckets = append(buckets, bucket{le, d})
			}
		case d <= 0:
		case key == "ok":
			rates.Reserved = d / elapsed
		default:
			rates.Refused[key] = d / elapsed
		}
	}
	if batches := now[keyBatches] - prev[keyBatches]; batches > 0 {
		rates.BatchSize = (now[keyBatchUnits] - prev[keyBatchUnits]) / batches
	}
	slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	if len(buckets) > 0 && buckets[len(buckets)-1].n > 0 {
		total := buckets[len(buckets)-1].n // +Inf's cumulative count, or the last bound's
		for _, b := range buckets {
			if b.n >= 0.99*total && !math.IsInf(b.le, 1) {
				ms := b.le * 1000
				rates.P99Ms = &ms
				break
			}
		}
	}
	return rates
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// handleLive is GET /admin/sales/{saleId}/live.
func handleLive(w *watcher, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, err := w.snapshot(c.Request.Context(), c.Param("saleId"))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		c.Header("Cache-Control", "no-store")
		writeRaw(c, http.StatusOK, body)
	}
}
