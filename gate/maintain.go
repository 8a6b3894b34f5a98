package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashline/flashline"
)

// drift is what this instance's gate job last found of one sale. How many
// checks in a row found a drift is counted in Redis (streakScript), across
// the instances whose jobs check the sale; the failures to read Redis are
// this instance's own.
type drift struct {
	// values are each counter's drift: the sale's one (variant ""), or one
	// per variant, in the sale's order.
	values []counterDrift
	opened bool // the sale has opened: it may be named in metrics
	// unreachable counts this instance's consecutive checks that could not
	// read Redis.
	unreachable int
}

// counterDrift is one counter's drift: variant is its SKU ("" for a sale
// without variants).
type counterDrift struct {
	variant string
	value   int64
}

// Maintain looks after every gated sale once (the gate job runs it every
// second, on whichever instance River gives the job): it settles units a
// reservation holds, returns the ones handed out longer than ReturnGrace
// ago that nothing holds (their request died), and checks that the counter
// agrees with the database, from one consistent view (measure):
//
//	drift = available in the stock rows − counter − units owed back and
//	        not applied − units handed out and not yet held or returned
//
// A counter that is missing, or Redis that this instance cannot read by
// DriftChecks checks in a row, pauses the sale with an incident; a drift
// found by DriftChecks checks in a row, by any instances, is an incident
// that lists what it counted, and pauses the sale when it is negative (the counter is above what the database allows: it would let
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
	v, consistent, err := g.measure(ctx, s.ID)
	var unreadable redisUnreadable
	redisDown := errors.As(err, &unreadable)
	g.mu.Lock()
	d := g.drifts[s.ID]
	// Only failures while the sale sells count: a sale paused through an
	// outage starts afresh when it is resumed. (A database that could not
	// be read before Redis was asked says nothing of Redis.)
	switch {
	case redisDown && selling:
		d.unreachable++
	case err == nil || redisDown:
		d.unreachable = 0
	}
	g.drifts[s.ID] = d
	g.mu.Unlock()
	switch {
	case err != nil:
		// Buyers fail closed at once; the sale is paused only when Redis
		// stays unreadable, not for one slow answer.
		if redisDown && selling && d.unreachable >= g.opts.DriftChecks {
			g.incident(ctx, s.ID, "gate_unreachable", "the gate's Redis cannot be read: "+err.Error(), true)
		}
		return 0, err
	case v.st.paused:
		return 0, nil // being rebuilt
	case v.st.missing:
		// A sale created a moment ago may not have its counter yet.
		if selling && time.Since(s.CreatedAt) > 10*time.Second {
			what := "the gate's counter is"
			if len(v.st.missingVariants) > 0 {
				what = "the gate's counter of variant " + strings.Join(v.st.missingVariants, ", ") + " is"
			}
			g.incident(ctx, s.ID, "gate_missing", what+" missing from Redis (restarted empty?): rebuild it from the database, then resume", true)
		}
		return 0, nil
	}
	if err := g.reconcile(ctx, s.ID, v.st, v.settled); err != nil {
		return 0, err
	}
	if !consistent {
		// The sale moved under every read (it is selling): no drift is
		// judged from this check, nor does it break a streak; the next
		// check reads it again.
		return v.ledger.OwedAge, nil
	}
	value := v.drift()
	terms := v.terms()
	values := make([]counterDrift, len(terms))
	for i, t := range terms {
		values[i] = counterDrift{variant: t.sku, value: t.drift()}
	}
	g.mu.Lock()
	d = g.drifts[s.ID]
	d.values, d.opened = values, s.State != flashline.StateScheduled
	g.drifts[s.ID] = d
	g.mu.Unlock()
	checks, stale, err := g.streak(ctx, s.ID, v.streakValue(), v.st.epoch != v.ledger.Epoch)
	if err != nil {
		return v.ledger.OwedAge, err
	}
	report := value != 0 && checks == g.opts.DriftChecks
	if selling && stale == g.opts.DriftChecks {
		// A rebuild's write of an older epoch landed last (one that ran
		// before this refusal existed): its units are all refused.
		g.incident(ctx, s.ID, "gate_stale_epoch", fmt.Sprintf("the gate's counter was written for epoch %d, the database is at %d: rebuild it, then resume", v.st.epoch, v.ledger.Epoch), true)
	}
	if report {
		detail := v.detail()
		if value < 0 {
			g.incident(ctx, s.ID, "gate_counter_high", v.counterName(true)+" above what the database accounts for ("+detail+"): rebuild it, then resume", true)
		} else {
			g.incident(ctx, s.ID, "gate_drift", v.counterName(false)+" below what the database accounts for, units go unsold ("+detail+"): rebuild it in a pause", false)
		}
	}
	return v.ledger.OwedAge, nil
}

// streakTTL is how long a streak of checks outlives its last check: the
// gate job runs every second, and a streak not checked for this long is of
// a drift nobody is looking at, not one found in a row.
const streakTTL = time.Minute

// Records one consistent check of a sale for the whole cluster (KEYS[1]:
// the sale's checks): its drift ARGV[1], and ARGV[2] 1 when the counter's
// epoch was not the database's. Returns the checks in a row, whichever
// instance made them, that found this drift, and the stale ones in a row.
// The periodic gate job lands on any instance: counted per instance, three
// checks of one instance found a drift that the others' checks in between
// did not, and a streak could span minutes.
var streakScript = redis.NewScript(`
local n = 1
if redis.call('HGET', KEYS[1], 'drift') == ARGV[1] then
  n = tonumber(redis.call('HGET', KEYS[1], 'checks')) + 1
end
local s = 0
if ARGV[2] == '1' then s = tonumber(redis.call('HGET', KEYS[1], 'stale') or '0') + 1 end
redis.call('HSET', KEYS[1], 'drift', ARGV[1], 'checks', n, 'stale', s)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {n, s}
`)

// streak records a consistent check's drift (view.streakValue) and epoch
// (streakScript).
func (g *Gate) streak(ctx context.Context, saleID string, value any, stale bool) (checks, staleChecks int, err error) {
	flag := 0
	if stale {
		flag = 1
	}
	res, err := g.call(ctx, g.background(), streakScript, []string{keysOf(saleID).checks}, value, flag, streakTTL.Milliseconds())
	if err != nil {
		return 0, 0, err
	}
	r := res.([]any)
	return int(r[0].(int64)), int(r[1].(int64)), nil
}

// redisUnreadable is a check that could not read Redis (the other errors
// are the database's).
type redisUnreadable struct{ error }

func (e redisUnreadable) Unwrap() error { return e.error }

// measure reads a gated sale for a consistent view: the database's ledger,
// then Redis (and which of the movements owed it applied already), then
// the settlements of the units in flight, then the ledger again. When the
// two ledgers are the same version nothing committed between them, and the
// view is consistent; else it reads again, up to measureTries times, and
// returns the last view, not consistent. A counter paused or missing is a
// view too (nothing to compare).
func (g *Gate) measure(ctx context.Context, saleID string) (view, bool, error) {
	var v view
	for range measureTries {
		before, err := g.store.GateLedger(ctx, saleID)
		if err != nil {
			return view{}, false, err
		}
		st, err := g.state(ctx, saleID, before.OwedMovements, before.VariantSKUs())
		if err != nil {
			return view{}, false, redisUnreadable{err}
		}
		v = view{st: st, ledger: before}
		if st.paused || st.missing {
			return v, true, nil
		}
		if len(st.unsettled) > 0 {
			seqs := slices.Collect(maps.Keys(st.unsettled))
			if v.settled, err = g.store.Settlements(ctx, saleID, seqs); err != nil {
				return view{}, false, err
			}
		}
		after, err := g.store.GateLedger(ctx, saleID)
		if err != nil {
			return view{}, false, err
		}
		if after.Version == before.Version {
			return v, true, nil
		}
	}
	return v, false, nil
}

// reconcile settles the units a reservation holds and returns those handed
// out longer than ReturnGrace ago that nothing holds (their request died),
// as st and settled found them.
func (g *Gate) reconcile(ctx context.Context, saleID string, st state, settled map[int64]flashline.GateSettlement) error {
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
			returned, err := g.store.ReturnUnit(ctx, flashline.GateUnit{SaleID: saleID, CustomerID: u.customer, Seq: seq, Quantity: u.quantity, Variant: u.variant})
			if err == nil && !returned {
				// A reservation took it after all, since Settlements read.
				held = append(held, strconv.FormatInt(seq, 10))
			}
		}
	}
	if len(held) > 0 {
		ctx, cancel := context.WithTimeout(ctx, g.background())
		defer cancel()
		if err := g.rdb.HDel(ctx, k.unsettled, held...).Err(); err != nil {
			return fmt.Errorf("gate: settle units: %w", err)
		}
	}
	return nil
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
// unreachable) and the drift, from one consistent view, without the gate
// job's persistence.
func (g *Gate) Status(ctx context.Context, saleID string) flashline.GateStatus {
	st, _ := g.check(ctx, saleID)
	return st
}

// check is Status, with the reason it could not be computed: Redis or the
// database could not be read, or the sale moved under every read (an error
// wrapping flashline.ErrUnavailable: "not now", not a counter that
// disagrees). A missing counter is no error: it is a counter that disagrees
// (not OK, -1).
func (g *Gate) check(ctx context.Context, saleID string) (flashline.GateStatus, error) {
	status := flashline.GateStatus{Kind: flashline.GateRedis, Counter: -1}
	v, consistent, err := g.measure(ctx, saleID)
	var unreadable redisUnreadable
	switch {
	case errors.As(err, &unreadable):
		return status, errors.Join(flashline.ErrUnavailable, err)
	case err != nil:
		return status, err
	case v.st.missing:
		return status, nil
	}
	status.Counter = v.st.counter
	status.Drift = v.drift()
	if len(v.ledger.Variants) > 0 {
		for _, t := range v.terms() {
			status.Variants = append(status.Variants, flashline.GateVariantStatus{SKU: t.sku, Counter: t.counter, Drift: t.drift()})
		}
	}
	if !consistent {
		return status, fmt.Errorf("gate of sale %s: units moved during each of %d reads of its counter and the database: ask again: %w", saleID, measureTries, flashline.ErrUnavailable)
	}
	// A counter written for another epoch than the database's hands out
	// units that no reservation may hold and no return gives back.
	status.OK = !v.st.paused && status.Drift == 0 && v.st.epoch == v.ledger.Epoch
	return status, nil
}

// driftCollector publishes the drift the gate job last found, for the sales
// that have opened: one series per counter, a sale with variants one per
// variant (at most flashline.MaxVariants a sale).
type driftCollector struct{ g *Gate }

var driftDesc = prometheus.NewDesc("flashline_gate_drift",
	"Drift of a gated sale's counter at the gate job's last check: available − counter − owed − in flight (0: they agree). A sale with variants has one per variant (variant: its SKU); variant is empty for a sale without.", []string{"sale_id", "variant"}, nil)

func (c driftCollector) Describe(ch chan<- *prometheus.Desc) { ch <- driftDesc }

func (c driftCollector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	for id, d := range c.g.drifts {
		if !d.opened {
			continue
		}
		for _, x := range d.values {
			ch <- prometheus.MustNewConstMetric(driftDesc, prometheus.GaugeValue, float64(x.value), id, x.variant)
		}
	}
}
