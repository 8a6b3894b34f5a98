package waitroom

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The line's analytics as this instance sees them (flashline.QueueCounts):
// the places it handed out, the tickets it admitted by their wait, the
// reservations made with an admission by the time since it, the waiters
// that stopped asking. All in memory, nothing written per arrival or poll:
// RunQueuePublisher writes each sale's counts to the shared table at most
// once a second while they change, and the console and the report add the
// instances' rows (flashline.MergeQueue). The same counts are this
// instance's metrics (flashline_waitroom_queue_*), for the sales that have
// opened, as the watermarks are.
//
// A waiter is one customer in one sale. An instance remembers, per waiter
// it answered, when it last answered and whether it admitted it (at most
// maxWaiters at once; past that, new waiters are not followed: neither
// counted as left nor kept from counting an admission twice). Each instance
// judges "left" by itself: a waiter whose page moves to another instance
// (its status stream reconnects every five minutes, and a load balancer may
// pick another; polls may spread over instances) goes quiet on the first,
// which counts it as left. So an instance also counts the waiters it
// returned to: the first time it hears a waiter (since it last forgot it)
// whose page began asking more than ReturnAfter before, it must have been
// heard before, elsewhere or before it went quiet. Every instance a waiter
// talked to ends its time with it once, admitted, told the sale sold out
// for good or reserved (not left) or silent (left); so a waiter heard by k
// instances, or k times, counts k ends and k−1 returns, and the line's left
// is the instances' Left less their Returns (flashline's QueueCounts.LeftLine):
// one for a waiter who left, none for one admitted or told sold out.

// ReturnAfter is how long after its ticket a page may first ask for its
// status: the ticket's answer tells it when, within pollAfter's 15 s
// jittered ±30% (19.5 s), and the ticket's arrival is kept to the second.
// A waiter first heard later than that was heard before (a return).
const ReturnAfter = 30 * time.Second

// asksFrom is when ticket t's page began asking for its status in sale s,
// for ReturnAfter: its arrival, but for a ticket placed by the draw before
// the open (which arrives at the start of the hour: drawnTicket) the
// opening time, and zero when the sale has none (no return is counted).
func asksFrom(s flashline.SaleFacts, t roomtoken.Ticket) time.Time {
	if !t.PreOpen || t.Draw == 0 {
		return t.ArrivedAt
	}
	if s.OpensAt == nil {
		return time.Time{}
	}
	return latest(t.ArrivedAt, *s.OpensAt)
}

// LeftAfter is how long a waiter may ask nothing of an instance before the
// instance counts it as left: three times the longest interval between
// answers it is told (pollAfter's 15 s, jittered).
const LeftAfter = 60 * time.Second

// maxWaiters bounds the waiters an instance follows at once.
const maxWaiters = 1 << 20

type waiterKey struct{ sale, customer string }

type lineWaiter struct {
	seen     time.Time
	admitted bool
	// soldOut: its last answer was "sold out for now" (it still asks, and
	// is still in line, but is not counted active).
	soldOut bool
	// ended: told the sale sold out for good. Its time in line ended here:
	// it is followed until the sweep forgets it (never counted left), so
	// that its page's next asks are no returns.
	ended bool
}

// statusSoldOutForNow is answered's state for a "sold out" answer that is
// not final (QueueIsFull false): the waiter asks again.
const statusSoldOutForNow = "sold_out_for_now"

// queueState is the state answered counts res as.
func queueState(res StatusResult) string {
	if res.State == StatusSoldOut && !res.QueueIsFull {
		return statusSoldOutForNow
	}
	return res.State
}

// queueStats is this instance's counts of each sale's line.
type queueStats struct {
	mu      sync.Mutex
	sales   map[string]*saleQueue
	waiters map[waiterKey]lineWaiter
}

type saleQueue struct {
	counts  flashline.QueueCounts
	version int64 // grows with every change; wrote is the last written
	wrote   int64
	// swept is when sweep last changed the version: while waiters are
	// active it does so every activeRefresh, so that the row stays fresh
	// enough for its Active to count (flashline.QueueActiveFresh) in a
	// line where nothing else changes (held, paused, slow).
	swept time.Time
}

// activeRefresh is how often a line's counts are written while it has
// active waiters, changed or not.
const activeRefresh = flashline.QueueActiveFresh / 2

func (q *queueStats) sale(saleID string) *saleQueue {
	if q.sales == nil {
		q.sales = map[string]*saleQueue{}
		q.waiters = map[waiterKey]lineWaiter{}
	}
	s := q.sales[saleID]
	if s == nil {
		s = &saleQueue{counts: flashline.NewQueueCounts()}
		q.sales[saleID] = s
	}
	return s
}

// arrived counts a new place in saleID's line.
func (q *queueStats) arrived(saleID string, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sale(saleID)
	s.counts.Arrivals++
	minute := now.Unix() / 60
	s.counts.Minutes[minute]++
	for m := range s.counts.Minutes {
		if m <= minute-flashline.QueueMinutes {
			delete(s.counts.Minutes, m)
		}
	}
	s.version++
}

// answered notes the status answer state (queueState) given at now to
// ticket t, whose page began asking at from (asksFrom): a waiter seen,
// admitted (its wait counted, once) or told the sale sold out for good (its
// time in line ended); and, the first time this instance hears it, a return
// when from is more than ReturnAfter before now.
func (q *queueStats) answered(saleID string, t roomtoken.Ticket, state string, from, now time.Time) {
	key := waiterKey{saleID, t.CustomerID}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sale(saleID)
	w, known := q.waiters[key]
	if known && w.ended {
		w.seen = now
		q.waiters[key] = w
		return
	}
	followed := known || len(q.waiters) < maxWaiters
	if !known && followed && !from.IsZero() && now.Sub(from) > ReturnAfter {
		// Only a waiter followed from here on counts one: one not followed
		// (past maxWaiters) would count another at each of its asks.
		s.counts.Returns++
		s.version++
	}
	switch state {
	case StatusSoldOut:
		if followed {
			q.waiters[key] = lineWaiter{seen: now, ended: true}
		}
		return
	case StatusAdmitted:
		if known && w.admitted {
			w.seen = now
			q.waiters[key] = w
			return
		}
		s.counts.Wait[flashline.QueueBucket(now.Sub(t.ArrivedAt))]++
		s.version++
		w.admitted = true
	}
	if !followed {
		return
	}
	w.seen = now
	w.soldOut = state == statusSoldOutForNow
	q.waiters[key] = w
}

// reserved counts a reservation made with admission a at now, the
// admission given ttl before it expires.
func (q *queueStats) reserved(a roomtoken.Admission, ttl time.Duration, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sale(a.SaleID)
	s.counts.ToReserve[flashline.QueueBucket(now.Sub(a.ExpiresAt.Add(-ttl)))]++
	s.version++
	// One admitted here stays followed, as admitted, until the sweep
	// forgets it: its page's asks after the reservation are no returns.
	// One admitted elsewhere and still followed here ends silent (left), as
	// for any instance it moved on from, against a return counted where it
	// was heard later.
}

// sweep counts the waiters not heard from for LeftAfter as left (an
// admitted one, or one told sold out for good, is only forgotten: it did
// not leave the line), and sets
// each sale's waiters seen lately.
func (q *queueStats) sweep(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	active := map[string]int64{}
	for key, w := range q.waiters {
		switch {
		case now.Sub(w.seen) <= LeftAfter:
			if !w.admitted && !w.soldOut && !w.ended {
				active[key.sale]++
			}
		case w.admitted || w.ended:
			delete(q.waiters, key)
		default:
			s := q.sale(key.sale)
			s.counts.Left++
			s.version++
			delete(q.waiters, key)
		}
	}
	for id, s := range q.sales {
		if s.counts.Active != active[id] || (active[id] > 0 && now.Sub(s.swept) >= activeRefresh) {
			s.counts.Active = active[id]
			s.version++
			s.swept = now
		}
	}
}

// unwritten is the encoded counts of the sales changed since they were
// last written, with their versions.
func (q *queueStats) unwritten() (map[string][]byte, map[string]int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	counts, versions := map[string][]byte{}, map[string]int64{}
	for id, s := range q.sales {
		if s.version == s.wrote {
			continue
		}
		b, err := json.Marshal(s.counts)
		if err != nil {
			continue
		}
		counts[id], versions[id] = b, s.version
	}
	return counts, versions
}

func (q *queueStats) wrote(versions map[string]int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, v := range versions {
		if s := q.sales[id]; s != nil && s.wrote < v {
			s.wrote = v
		}
	}
}

// QueueCounts is a copy of this instance's counts of saleID's line (empty
// counts for a sale it has seen nothing of).
func (r *Room) QueueCounts(saleID string) flashline.QueueCounts {
	r.queue.mu.Lock()
	defer r.queue.mu.Unlock()
	c := flashline.NewQueueCounts()
	if s := r.queue.sales[saleID]; s != nil {
		c.Add(s.counts, true)
	}
	return c
}

// Reserved counts a reservation made with the admission token a (already
// checked: this sale's, this customer's, not expired) now, for the time
// from admission to reservation.
func (r *Room) Reserved(a roomtoken.Admission) {
	r.queue.reserved(a, r.opts.AdmissionTTL, r.opts.Now())
}

// QueuePublisher writes an instance's counts of each sale's line
// (*postgres.Store), or, on an edge, passes them on to its origins
// (edge.Client: they join its report).
type QueuePublisher interface {
	PublishQueue(ctx context.Context, instance string, counts map[string][]byte) error
}

// EdgeQueuePublisher writes the edges' counts of the lines an origin heard
// in their reports, each row as of its report, an older never over a newer
// (*postgres.Store).
type EdgeQueuePublisher interface {
	PublishEdgeQueues(ctx context.Context, rows []flashline.QueueRow) error
}

// RunQueuePublisher counts the waiters gone quiet and writes the counts of
// the sales whose line changed (one statement for all of them) every
// second, until ctx is done; and, when store is an EdgeQueuePublisher, the
// edges' counts heard since the last write (one more statement). A failed
// write is logged; the next tick writes them again.
func (r *Room) RunQueuePublisher(ctx context.Context, store QueuePublisher, instance string, logger *slog.Logger) error {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	edges, _ := store.(EdgeQueuePublisher)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		r.queue.sweep(r.opts.Now())
		if counts, versions := r.queue.unwritten(); len(counts) > 0 {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := store.PublishQueue(wctx, instance, counts)
			cancel()
			if err != nil {
				logger.WarnContext(ctx, "waitroom: publish the line's counts", "err", err)
			} else {
				r.queue.wrote(versions)
			}
		}
		if edges == nil {
			continue
		}
		if rows := r.edgeLines.unwritten(); len(rows) > 0 {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := edges.PublishEdgeQueues(wctx, rows)
			cancel()
			if err != nil {
				logger.WarnContext(ctx, "waitroom: publish the edges' counts of the lines", "err", err)
				continue
			}
			r.edgeLines.wrote(rows)
		}
	}
}

// queueCollector publishes this instance's counts as metrics, for the
// sales that have opened (a sale's id is not announced before: see
// watermarks).
type queueCollector struct{ r *Room }

var (
	queueWaitDesc = prometheus.NewDesc("flashline_waitroom_queue_wait_seconds",
		"Tickets this instance admitted, by time from arrival to admission.", []string{"sale_id"}, nil)
	queueToReserveDesc = prometheus.NewDesc("flashline_waitroom_queue_admission_to_reservation_seconds",
		"Reservations this instance made with an admission token, by time from admission to reservation.", []string{"sale_id"}, nil)
	queueArrivalsDesc = prometheus.NewDesc("flashline_waitroom_queue_arrivals_total",
		"Places in line this instance handed out.", []string{"sale_id"}, nil)
	queueLeftDesc = prometheus.NewDesc("flashline_waitroom_queue_left_total",
		"Waiters this instance answered that asked nothing more of it for a minute, neither admitted nor told the sale sold out for good (each instance alone: see returns).", []string{"sale_id"}, nil)
	queueReturnsDesc = prometheus.NewDesc("flashline_waitroom_queue_returns_total",
		"Waiters this instance first heard more than 30 s after their page began asking (heard before elsewhere, or before they went quiet): sum(left) - sum(returns) over instances is the line's left.", []string{"sale_id"}, nil)
	queueActiveDesc = prometheus.NewDesc("flashline_waitroom_queue_active",
		"Waiters this instance answered 'waiting' in the last minute.", []string{"sale_id"}, nil)
)

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queueWaitDesc, queueToReserveDesc, queueArrivalsDesc, queueLeftDesc, queueReturnsDesc, queueActiveDesc} {
		ch <- d
	}
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.r.opts.Now()
	for _, s := range c.r.rooms() {
		if !s.Opened(now) {
			continue
		}
		q := c.r.QueueCounts(s.ID)
		ch <- histogram(queueWaitDesc, q.Wait, s.ID)
		ch <- histogram(queueToReserveDesc, q.ToReserve, s.ID)
		ch <- prometheus.MustNewConstMetric(queueArrivalsDesc, prometheus.CounterValue, float64(q.Arrivals), s.ID)
		ch <- prometheus.MustNewConstMetric(queueLeftDesc, prometheus.CounterValue, float64(q.Left), s.ID)
		ch <- prometheus.MustNewConstMetric(queueReturnsDesc, prometheus.CounterValue, float64(q.Returns), s.ID)
		ch <- prometheus.MustNewConstMetric(queueActiveDesc, prometheus.GaugeValue, float64(q.Active), s.ID)
	}
}

// histogram is counts (one per bucket of QueueBuckets, and one past them)
// as a Prometheus histogram; the sum is each bucket's middle (the counts
// keep no sum).
func histogram(d *prometheus.Desc, counts []int64, saleID string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(flashline.QueueBuckets))
	var total uint64
	var sum, low float64
	for i, le := range flashline.QueueBuckets {
		total += uint64(counts[i])
		buckets[le] = total
		sum += float64(counts[i]) * (low + le) / 2
		low = le
	}
	total += uint64(counts[len(flashline.QueueBuckets)])
	sum += float64(counts[len(flashline.QueueBuckets)]) * low
	return prometheus.MustNewConstHistogram(d, total, sum, buckets, saleID)
}
