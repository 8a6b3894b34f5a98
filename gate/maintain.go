package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
)

// drift is one sale's drift across the gate job's checks.
type drift struct {
	value  int64
	checks int  // consecutive checks that found value
	opened bool // the sale has opened: it may be named in metrics
	// unreachable counts consecutive checks that could not read Redis.
	unreachable int
	// stale counts consecutive checks that found the counter written for
	// another epoch than the database's.
	stale int
}

// Maintain looks after every gated sale once (the gate job runs it every
// second, on one instance): it settles units a reservation holds, returns
// the ones handed out longer than ReturnGrace ago that nothing holds (their
// request died), and checks that the counter agrees with the database:
//
//	drift = available in the stock rows − counter − units owed back −
//	        units handed out and not yet held or returned
//
// A counter that is missing, or Redis that cannot be read by DriftChecks
// checks in a row, pauses the sale with an incident; a drift found by
// DriftChecks checks in a row is an incident, and pauses the sale when it
// is negative (the counter is above what the database allows: it would let
// more buyers try than there are units). A positive one is undersell:
// reported, not paused.
func (g *Gate) Maintain(ctx context.Context) error {
	sales, err := g.store.GatedSales(ctx)
	if err != nil || len(sales) == 0 {
		return err
	}
	if g.rdb == nil {
		// A misconfigured instance: those with Redis keep the gate; this
		// one fails its buyers closed, and says so.
		return fmt.Errorf("gate: %d gated sales to look after: %w", len(sales), ErrNoRedis)
	}
	var errs error
	var oldest time.Duration
	seen := make(map[string]bool, len(sales))
	for _, s := range sales {
		seen[s.ID] = true
		age, err := g.maintain(ctx, s)
		oldest = max(oldest, age)
		errs = errors.Join(errs, err)
	}
	g.m.owedAge.Set(oldest.Seconds())
	g.mu.Lock()
	for id := range g.drifts {
		if !seen[id] {
			delete(g.drifts, id)
		}
	}
	g.mu.Unlock()
	return errs
}

// maintain looks after one gated sale and returns the relay's lag for it.
func (g *Gate) maintain(ctx context.Context, s flashline.GatedSale) (time.Duration, error) {
	selling := s.State == flashline.StateOpen || s.State == flashline.StateScheduled
	st, err := g.state(ctx, s.ID)
	g.mu.Lock()
	d := g.drifts[s.ID]
	// Only failures while the sale sells count: a sale paused through an
	// outage starts afresh when it is resumed.
	if err != nil && selling {
		d.unreachable++
	} else {
		d.unreachable = 0
	}
	g.drifts[s.ID] = d
	g.mu.Unlock()
	switch {
	case err != nil:
		// Buyers fail closed at once; the sale is paused only when Redis
		// stays unreadable, not for one slow answer.
		if selling && d.unreachable >= g.opts.DriftChecks {
			g.incident(ctx, s.ID, "gate_unreachable", "the gate's Redis cannot be read: "+err.Error(), true)
		}
		return 0, err
	case st.paused:
		return 0, nil // being rebuilt
	case st.missing:
		// A sale created a moment ago may not have its counter yet.
		if selling && time.Since(s.CreatedAt) > 10*time.Second {
			g.incident(ctx, s.ID, "gate_missing", "the gate's counter is missing from Redis (restarted empty?): rebuild it from the database, then resume", true)
		}
		return 0, nil
	}
	inflight, err := g.reconcile(ctx, s.ID, st)
	if err != nil {
		return 0, err
	}
	ledger, err := g.store.GateLedger(ctx, s.ID)
	if err != nil {
		return 0, err
	}
	value := ledger.Available - st.counter - ledger.Owed - inflight
	g.mu.Lock()
	prev := g.drifts[s.ID]
	stale := prev.stale
	if st.epoch != ledger.Epoch {
		stale++
	} else {
		stale = 0
	}
	if value == prev.value {
		prev.checks++
	} else {
		prev = drift{value: value, checks: 1}
	}
	prev.stale = stale
	prev.opened = s.State != flashline.StateScheduled
	g.drifts[s.ID] = prev
	report := value != 0 && prev.checks == g.opts.DriftChecks
	g.mu.Unlock()
	if selling && stale == g.opts.DriftChecks {
		// A rebuild's write of an older epoch landed last (one that ran
		// before this refusal existed): its units are all refused.
		g.incident(ctx, s.ID, "gate_stale_epoch", fmt.Sprintf("the gate's counter was written for epoch %d, the database is at %d: rebuild it, then resume", st.epoch, ledger.Epoch), true)
	}
	if report {
		detail := fmt.Sprintf("drift %d: available %d − counter %d − owed back %d − in flight %d", value, ledger.Available, st.counter, ledger.Owed, inflight)
		if value < 0 {
			g.incident(ctx, s.ID, "gate_counter_high", "the gate's counter is above what the database accounts for ("+detail+"): rebuild it, then resume", true)
		} else {
			g.incident(ctx, s.ID, "gate_drift", "the gate's counter is below what the database accounts for, units go unsold ("+detail+"): rebuild it in a pause", false)
		}
	}
	return ledger.OwedAge, nil
}

// reconcile settles the units a reservation holds, returns those handed out
// longer than ReturnGrace ago that nothing holds, and returns the units
// still in flight.
func (g *Gate) reconcile(ctx context.Context, saleID string, st state) (inflight int64, err error) {
	if len(st.unsettled) == 0 {
		return 0, nil
	}
	seqs := make([]int64, 0, len(st.unsettled))
	for seq := range st.unsettled {
		seqs = append(seqs, seq)
	}
	settled, err := g.store.Settlements(ctx, saleID, seqs)
	if err != nil {
		return 0, err
	}
	k := keysOf(saleID)
	var held []string
	for seq, u := range st.unsettled {
		s := settled[seq]
		switch {
		case s.Reserved:
			held = append(held, strconv.FormatInt(seq, 10))
		case s.Returned:
			// Owed back (GateLedger.Owed) until the relay applies it.
		case time.Since(u.at) > g.opts.ReturnGrace:
			req := flashline.ReserveRequest{SaleID: saleID, CustomerID: u.customer, IdempotencyKey: u.key}
			g.forget(ctx, req, seq)
			returned, err := g.store.ReturnUnit(ctx, flashline.GateUnit{SaleID: saleID, CustomerID: u.customer, Seq: seq, Quantity: u.quantity})
			switch {
			case err != nil:
				inflight += int64(u.quantity)
			case !returned:
				// A reservation took it after all, since Settlements read.
				held = append(held, strconv.FormatInt(seq, 10))
			}
		default:
			inflight += int64(u.quantity)
		}
	}
	if len(held) > 0 {
		ctx, cancel := context.WithTimeout(ctx, g.background())
		defer cancel()
		if err := g.rdb.HDel(ctx, k.unsettled, held...).Err(); err != nil {
			return inflight, fmt.Errorf("gate: settle units: %w", err)
		}
	}
	return inflight, nil
}

func (g *Gate) incident(ctx context.Context, saleID, kind, detail string, pause bool) {
	paused, err := g.store.Incident(ctx, saleID, kind, detail, pause)
	switch {
	case err != nil:
		g.opts.Logger.ErrorContext(ctx, "gate: record an incident", "sale_id", saleID, "kind", kind, "err", err)
	case paused:
		g.opts.Logger.ErrorContext(ctx, "gate: sale paused", "sale_id", saleID, "kind", kind, "detail", detail)
	case !pause:
		g.opts.Logger.ErrorContext(ctx, "gate: drift", "sale_id", saleID, "kind", kind, "detail", detail)
	}
}

// Status says how a gated sale's counter stands now (for the admin's view
// and for resume): the counter as Redis holds it (-1: missing or
// unreachable) and the drift, computed once, without the gate job's
// persistence (units moving between the two reads show as a passing drift).
func (g *Gate) Status(ctx context.Context, saleID string) flashline.GateStatus {
	st, _ := g.check(ctx, saleID)
	return st
}

// check is Status, with the reason it could not be computed: Redis or the
// database could not be read (an error wrapping flashline.ErrUnavailable:
// "not now", not a counter that disagrees). A missing counter is no error:
// it is a counter that disagrees (not OK, -1).
func (g *Gate) check(ctx context.Context, saleID string) (flashline.GateStatus, error) {
	status := flashline.GateStatus{Kind: flashline.GateRedis, Counter: -1}
	st, err := g.state(ctx, saleID)
	if err != nil {
		return status, errors.Join(flashline.ErrUnavailable, err)
	}
	if st.missing {
		return status, nil
	}
	status.Counter = st.counter
	var inflight int64
	if len(st.unsettled) > 0 {
		seqs := make([]int64, 0, len(st.unsettled))
		for seq := range st.unsettled {
			seqs = append(seqs, seq)
		}
		settled, err := g.store.Settlements(ctx, saleID, seqs)
		if err != nil {
			return status, err
		}
		for seq, u := range st.unsettled {
			if s := settled[seq]; !s.Reserved && !s.Returned {
				inflight += int64(u.quantity)
			}
		}
	}
	ledger, err := g.store.GateLedger(ctx, saleID)
	if err != nil {
		return status, err
	}
	status.Drift = ledger.Available - st.counter - ledger.Owed - inflight
	// A counter written for another epoch than the database's hands out
	// units that no reservation may hold and no return gives back.
	status.OK = !st.paused && status.Drift == 0 && st.epoch == ledger.Epoch
	return status, nil
}

// driftCollector publishes the drift the gate job last found, for the sales
// that have opened.
type driftCollector struct{ g *Gate }

var driftDesc = prometheus.NewDesc("flashline_gate_drift",
	"Drift of a gated sale's counter at the gate job's last check: available − counter − owed − in flight (0: they agree).", []string{"sale_id"}, nil)

func (c driftCollector) Describe(ch chan<- *prometheus.Desc) { ch <- driftDesc }

func (c driftCollector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	for id, d := range c.g.drifts {
		if d.opened {
			ch <- prometheus.MustNewConstMetric(driftDesc, prometheus.GaugeValue, float64(d.value), id)
		}
	}
}
