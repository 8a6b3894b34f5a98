package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashline/flashline"
)

// Sees is what the gate must see of the Store it wraps: every method that
// makes stock (a gated sale's counter is set before it can sell), takes it
// (the gate step hands out the unit) or returns it (the relay gives the
// units back to the counter at once rather than at the gate job's next
// run). Wrap's store declares each of them itself (flashline.StockEffectOf),
// and Sale and SetSaleState besides; a test of package stack fails when one
// would pass through unseen.
const Sees = flashline.StockCreated | flashline.StockTaken | flashline.StockReturned

// Wrap returns store with the gate in front of gated sales: Reserve passes
// through the gate step first, CreateSale sets a gated sale's counter, Sale
// shows how the counter stands, resuming a gated sale needs a counter that
// agrees with the database, and what returns units (Cancel, Void, a payment
// event that cancels or voids) relays them at once. Sales without a gate
// pass straight through.
func (g *Gate) Wrap(store flashline.Store) flashline.Store {
	return gated{Store: store, g: g}
}

type gated struct {
	flashline.Store
	g *Gate
}

// gateOutcome is the gate step's answer.
type gateOutcome struct {
	seq   int64
	fresh bool // a unit handed out now (else the attempt's earlier one)
}

// step runs the gate step for a request, taking its unit from the counter
// of variant (its variant in a sale with variants; "": the sale's one
// counter).
func (g *Gate) step(ctx context.Context, req flashline.ReserveRequest, limit int, variant string) (gateOutcome, error) {
	k := keysOf(req.SaleID)
	start := time.Now()
	res, err := g.call(ctx, g.opts.Timeout, reserveScript,
		[]string{k.counter(variant), k.seq, k.attempts, k.buyers, k.unsettled, k.applied, k.paused},
		req.CustomerID, attemptField(req.CustomerID, req.IdempotencyKey), req.Quantity, limit, time.Now().UnixMilli(), variant)
	g.m.script.Observe(time.Since(start).Seconds())
	if err != nil {
		if flashline.ClientGone(ctx, err) {
			// The client left while Redis was asked: nothing is wrong with
			// it. (A unit the script handed out anyway goes back after
			// ReturnGrace, as any abandoned request's.)
			g.m.decisions.WithLabelValues("client_closed").Inc()
			return gateOutcome{}, err
		}
		g.m.decisions.WithLabelValues("unavailable").Inc()
		return gateOutcome{}, errors.Join(flashline.ErrUnavailable, err)
	}
	r := res.([]any)
	code, seq := r[0].(int64), r[1].(int64)
	switch code {
	case 1:
		g.m.decisions.WithLabelValues("won").Inc()
		return gateOutcome{seq: seq, fresh: true}, nil
	case 2:
		g.m.decisions.WithLabelValues("already").Inc()
		return gateOutcome{seq: seq}, nil
	case -5:
		// The key's earlier attempt took its unit for another quantity, and
		// nothing has decided that unit yet: held for this request, it would
		// count one quantity in the gate and another in the database (a
		// counter above the database pauses the sale). The same key with
		// another request is refused, as the database refuses it once the
		// key has an answer.
		g.m.decisions.WithLabelValues("key_reused").Inc()
		return gateOutcome{}, fmt.Errorf("gate of sale %s: the key's unit %d was taken for another quantity: %w", req.SaleID, seq, flashline.ErrIdempotencyKeyReused)
	case -1:
		g.m.decisions.WithLabelValues("sold_out").Inc()
		if variant != "" {
			// The variant's counter is empty: answered as the purchase path
			// answers a variant with nothing left (others may have some).
			return gateOutcome{}, fmt.Errorf("gate of sale %s, variant %s: %w", req.SaleID, variant, flashline.ErrVariantSoldOut)
		}
		return gateOutcome{}, fmt.Errorf("gate of sale %s: %w", req.SaleID, flashline.ErrSoldOut)
	case -2:
		g.m.decisions.WithLabelValues("limit").Inc()
		return gateOutcome{}, fmt.Errorf("gate of sale %s: %w", req.SaleID, flashline.ErrLimitReached)
	case -3:
		// Redis lost the counter (restarted empty?): nobody buys until it is
		// rebuilt from the database; the gate job pauses the sale.
		g.m.decisions.WithLabelValues("missing").Inc()
		return gateOutcome{}, fmt.Errorf("gate of sale %s: the counter is missing: %w", req.SaleID, flashline.ErrUnavailable)
	default:
		g.m.decisions.WithLabelValues("paused").Inc()
		return gateOutcome{}, fmt.Errorf("gate of sale %s: the counter is being rebuilt: %w", req.SaleID, flashline.ErrUnavailable)
	}
}

// Reserve passes a gated sale's request through the gate step first. Only
// its winners reach the database, with the number of their unit; a unit the
// database did not let the request hold goes back (giveBack). A retry of an
// attempt reuses the attempt's unit, so it never takes a second one.
func (w gated) Reserve(ctx context.Context, req flashline.ReserveRequest) (flashline.ReserveResult, error) {
	s, isGated, err := w.g.gated(ctx, req.SaleID)
	if err != nil {
		return flashline.ReserveResult{}, fmt.Errorf("gate of sale %s: %w", req.SaleID, err)
	}
	if !isGated {
		return w.Store.Reserve(ctx, req)
	}
	// What can be refused from the request and the sale alone is refused
	// before it costs the gate anything: a unit taken for a request the
	// database then refuses is missing from the counter until it comes
	// back, and a crowd of such requests (no admission token) would keep a
	// gated sale looking sold out to the buyers it admitted.
	if res, done, err := w.refuse(ctx, s, req); done {
		return res, err
	}
	// A sale with variants has a counter per variant: the unit comes from
	// the one of the variant asked for (refuse made sure the sale has it).
	// A sale without variants takes from its one counter, whatever the
	// request names (the database refuses a variant there, as it did).
	variant := ""
	if len(s.Variants) > 0 {
		variant = req.Variant
	}
	for try := 0; ; try++ {
		out, err := w.g.step(ctx, req, s.PerCustomerLimit, variant)
		if errors.Is(err, flashline.ErrLimitReached) {
			out, err = w.g.confirmLimit(ctx, req, s.PerCustomerLimit, variant)
		}
		if errors.Is(err, flashline.ErrUnavailable) {
			// The gate cannot decide (Redis down, the counter missing or
			// being rebuilt), but a retry whose first attempt reserved has
			// its answer in the database already: it is replayed, as
			// without the gate, rather than kept waiting until its hold
			// expires unseen.
			if res, stored, serr := w.g.store.StoredAnswer(ctx, req); stored {
				return res, serr
			}
		}
		if err != nil {
			return flashline.ReserveResult{}, err
		}
		req.GateSeq = out.seq
		res, err := w.Store.Reserve(ctx, req)
		unit := flashline.GateUnit{SaleID: req.SaleID, CustomerID: req.CustomerID, Seq: out.seq, Quantity: req.Quantity, Variant: variant}
		if errors.Is(err, flashline.ErrGateUnitReturned) && try == 0 {
			// The attempt's unit went back (the gate job judged it
			// abandoned): forget it and take a new one, once.
			w.g.forget(ctx, req, out.seq)
			continue
		}
		if err == nil && !res.Replayed {
			return res, nil // the reservation holds the unit
		}
		if out.fresh {
			// Refused, replayed, or not known to have committed: a unit taken
			// now that no reservation may hold goes back. If the request is
			// still committing somewhere, the customer's lock decides which
			// of the two wins; if this fails, the gate job returns it.
			w.g.giveBack(req, unit)
		}
		if errors.Is(err, flashline.ErrGateUnitReturned) {
			// Twice (a rebuild between the two?): the client retries.
			err = fmt.Errorf("gate of sale %s: %w", req.SaleID, errors.Join(flashline.ErrUnavailable, err))
		}
		return res, err
	}
}

// refuse answers, before the gate step, what the database would refuse the
// request for whatever the counter held: a sale with variants asked for
// none or for one it does not have (no counter to take from), a quantity
// above the limit, a
// waiting-room or lottery sale's missing or unverified admission, an
// account too new. The clock is the sale cache's, set by the database's. A
// refusal stands only when the key has no stored answer: a retry of a
// request that reserved (its admission token expired since) is replayed,
// as the database replays it before any of these checks. What only the
// database knows (an admission used already, an instrument's units) is left
// to it: such a request's unit goes back at once (giveBack).
func (w gated) refuse(ctx context.Context, s flashline.SaleFacts, req flashline.ReserveRequest) (res flashline.ReserveResult, done bool, err error) {
	refusal := precheck(s, req, w.g.cache.Now())
	if refusal == nil {
		return flashline.ReserveResult{}, false, nil
	}
	if errors.Is(refusal, flashline.ErrQuantityAboveLimit) {
		return flashline.ReserveResult{}, true, refusal // a stored answer's quantity was within it
	}
	res, stored, err := w.g.store.StoredAnswer(ctx, req)
	switch {
	case stored:
		return res, true, err // replayed, or the key reused for another request
	case err != nil:
		return flashline.ReserveResult{}, true, fmt.Errorf("gate of sale %s: %w", req.SaleID, flashline.Unavailable(ctx, err))
	}
	return flashline.ReserveResult{}, true, refusal
}

// precheck is refuse's checks, in the order the database runs them
// (postgres/batch.go decide), with its words. A variant named in a sale
// without variants is left to the database, as before variants.
func precheck(s flashline.SaleFacts, req flashline.ReserveRequest, now time.Time) error {
	_, known := s.Variant(req.Variant)
	switch {
	case len(s.Variants) > 0 && req.Variant == "":
		return flashline.Invalid("this sale has variants: name one (\"variant\": its SKU)")
	case len(s.Variants) > 0 && !known:
		return flashline.Invalid("this sale has no variant " + req.Variant)
	case req.Quantity > s.PerCustomerLimit:
		return flashline.ErrQuantityAboveLimit
	case s.Admission.NeedsAdmission() && req.AdmissionToken == "":
		return flashline.ErrAdmissionRequired
	case s.Admission.NeedsAdmission() && req.AdmissionID == "":
		return flashline.ErrAdmissionInvalid
	case req.AdmissionVariant != "" && req.Variant != req.AdmissionVariant:
		return flashline.ErrVariantNotWon
	case !flashline.AccountOldEnough(req.AccountCreated, s.Room.MinAccountAgeSeconds, now):
		return flashline.ErrAccountTooNew
	}
	return nil
}

// confirmLimit checks the gate step's limit refusal against the database.
// The gate counts a customer's units until the relay applies what is owed
// back for them (a cancel, an expiry, a unit no reservation took), so a
// customer who cancels and buys again at once may still be counted there.
// What the database no longer owes was applied to Redis before it was
// marked, so the step is asked again after reading what is owed (a relay
// may have applied it since the first step), after relaying first when
// something is owed. Should the step still refuse while something stayed
// owed (another relay holds it, being applied), the buyer is asked to
// retry rather than refused for units they do not hold: ErrOverloaded (busy
// for a moment, retry after Retry-After), not ErrUnavailable, which says
// the stock cannot be counted and fails the sale closed for the request. A
// retry storm makes this common (an abandoned attempt's unit is owed back
// while its retry arrives), and nothing is down.
//
// Nor is anything owed yet for a unit the gate handed out to a request the
// database has not decided, or refused a moment ago (its return is written
// off the request's path, after the answer): the gate counts it from its
// step on. So a refusal with nothing owed stands only when the database
// agrees, the customer holding an active reservation (the purchase path's
// own limit_reached, read with what is owed: one round trip, a hold made
// between the read and the step only answered retry once more); otherwise the units the gate counts are in flight and
// the buyer is asked to retry as well (found by the chaos harness,
// redis-kill: a customer whose request was refused while the sale was
// paused was told limit_reached by their next one, holding nothing).
func (g *Gate) confirmLimit(ctx context.Context, req flashline.ReserveRequest, limit int, variant string) (gateOutcome, error) {
	owed, holds, err := g.store.OwedToCustomer(ctx, req.SaleID, req.CustomerID)
	if err == nil && owed > 0 {
		if _, err = g.Relay(ctx); err == nil {
			owed, holds, err = g.store.OwedToCustomer(ctx, req.SaleID, req.CustomerID)
		}
	}
	if err != nil {
		return gateOutcome{}, fmt.Errorf("gate of sale %s: %w", req.SaleID, flashline.Unavailable(ctx, err))
	}
	out, err := g.step(ctx, req, limit, variant)
	if !errors.Is(err, flashline.ErrLimitReached) {
		return out, err
	}
	if owed > 0 {
		return gateOutcome{}, fmt.Errorf("gate of sale %s: %d units of %s still owed back to the counter: %w", req.SaleID, owed, req.CustomerID, flashline.ErrOverloaded)
	}
	if !holds {
		return gateOutcome{}, fmt.Errorf("gate of sale %s: units of %s in flight (handed out, neither held nor returned yet): %w", req.SaleID, req.CustomerID, flashline.ErrOverloaded)
	}
	return out, err
}

// forget makes the attempt's next try take a new unit. It is bookkeeping
// bounded by the gate's timeout, done whether or not the request's client
// is still there (a client that leaves is no failure to log).
func (g *Gate) forget(ctx context.Context, req flashline.ReserveRequest, seq int64) {
	ctx = context.WithoutCancel(ctx)
	k := keysOf(req.SaleID)
	if _, err := g.call(ctx, g.opts.Timeout, forgetScript, []string{k.attempts}, attemptField(req.CustomerID, req.IdempotencyKey), strconv.FormatInt(seq, 10)); err != nil {
		g.opts.Logger.WarnContext(ctx, "gate: forget an attempt", "sale_id", req.SaleID, "err", err)
	}
}

// giveBack returns a unit no reservation took, off the request's path: the
// client has its answer already (or has left). The attempt is forgotten only
// once its unit is owed back, so that its retry is never counted for a unit
// nothing owes back yet: before, the retry reuses the attempt's unit (and, if
// the return came first, the database refuses it and the retry takes a new
// one); after, confirmLimit relays what is owed. A unit a reservation took
// meanwhile (the retry's, with the customer's lock) is not returned, and the
// attempt keeps it, so that its next retry replays.
func (g *Gate) giveBack(req flashline.ReserveRequest, u flashline.GateUnit) {
	g.givingBack.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		returned, err := g.store.ReturnUnit(ctx, u)
		if err != nil {
			g.opts.Logger.WarnContext(ctx, "gate: give a unit back (the gate job will)", "sale_id", u.SaleID, "seq", u.Seq, "err", err)
			return
		}
		if returned {
			g.forget(ctx, req, u.Seq)
			g.Kick()
		}
	})
}

// CreateSale creates the sale, and a gated sale's counter: set before the
// sale can sell. If Redis cannot take it, the sale is paused with an
// incident, and its counter is made by a rebuild.
func (w gated) CreateSale(ctx context.Context, n flashline.NewSale) (flashline.Sale, error) {
	if n.Gate == flashline.GateRedis && w.g.rdb == nil {
		return flashline.Sale{}, flashline.Invalid(`"gate": "redis" needs a Redis: start flashline serve with --redis-url`)
	}
	sale, err := w.Store.CreateSale(ctx, n)
	if err != nil || sale.Gate != flashline.GateRedis {
		return sale, err
	}
	if err := w.g.initCounter(ctx, sale); err != nil {
		detail := "the gate's counter could not be set at creation: " + err.Error()
		if _, ierr := w.g.store.Incident(ctx, sale.ID, "gate_missing", detail, true); ierr != nil {
			err = errors.Join(err, ierr)
		}
		return flashline.Sale{}, fmt.Errorf("create sale %s: %w", sale.ID, errors.Join(flashline.ErrUnavailable, err))
	}
	return w.Sale(ctx, sale.ID)
}

func (g *Gate) initCounter(ctx context.Context, sale flashline.Sale) error {
	if g.rdb == nil {
		return ErrNoRedis
	}
	k := keysOf(sale.ID)
	// Off a buyer's path: the background bound, not the buyer's 250 ms, which
	// a first connection to Redis on a busy machine can outlast; a sale
	// created while Redis is briefly slow then starts paused for nothing.
	ctx, cancel := context.WithTimeout(ctx, g.background())
	defer cancel()
	pipe := g.rdb.TxPipeline()
	if len(sale.Variants) == 0 {
		pipe.SetNX(ctx, k.stock, sale.InitialStock, 0)
	}
	for _, v := range sale.Variants {
		pipe.SetNX(ctx, k.counter(v.SKU), v.InitialStock, 0) // a counter per variant
	}
	pipe.SetNX(ctx, k.seq, seqBase(0), 0)
	_, err := pipe.Exec(ctx)
	return err
}

// Cancel cancels the reservation; a gated one's units go back to the
// counter now rather than at the gate job's next run.
func (w gated) Cancel(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	r, err := w.Store.Cancel(ctx, reservationID, by)
	if err == nil {
		w.g.Kick()
	}
	return r, err
}

// Void voids the order; a gated one's units go back to the counter now, as
// Cancel's.
func (w gated) Void(ctx context.Context, reservationID, reason, operator string) (flashline.Reservation, error) {
	r, err := w.Store.Void(ctx, reservationID, reason, operator)
	if err == nil {
		w.g.Kick()
	}
	return r, err
}

// ApplyPaymentEvent applies the event; one that returned units (a failed
// payment's cancel, a refund's void) relays them now, as Cancel.
func (w gated) ApplyPaymentEvent(ctx context.Context, e flashline.PaymentEvent) (flashline.PaymentResult, error) {
	res, err := w.Store.ApplyPaymentEvent(ctx, e)
	if err == nil && res.ReturnedUnits() {
		w.g.Kick()
	}
	return res, err
}

// Sale reads the sale, with how a gated sale's counter stands.
func (w gated) Sale(ctx context.Context, saleID string) (flashline.Sale, error) {
	sale, err := w.Store.Sale(ctx, saleID)
	if err != nil || sale.Gate != flashline.GateRedis {
		return sale, err
	}
	st := w.g.Status(ctx, saleID)
	sale.GateStatus = &st
	return sale, nil
}

// SetSaleState applies an admin action; resuming a gated sale needs a
// counter that agrees with the database (after a rebuild, if it was lost).
func (w gated) SetSaleState(ctx context.Context, saleID string, action flashline.SaleAction) (flashline.Sale, error) {
	if action == flashline.ActionResume {
		sale, err := w.Store.Sale(ctx, saleID)
		if err != nil {
			return flashline.Sale{}, err
		}
		if sale.Gate == flashline.GateRedis {
			if w.g.rdb == nil {
				return flashline.Sale{}, fmt.Errorf("resume sale %s: its gate needs a Redis (--redis-url): %w", saleID, errors.Join(flashline.ErrUnavailable, ErrNoRedis))
			}
			st, err := w.g.check(ctx, saleID)
			switch {
			case err != nil:
				// Redis (just back, its connections being dialed) or the
				// database could not be read: "not now", not a broken count.
				return flashline.Sale{}, fmt.Errorf("resume sale %s: read its gate: %w", saleID, err)
			case !st.OK:
				return flashline.Sale{}, fmt.Errorf("resume sale %s: the gate's counter %d does not agree with the database (drift %d): rebuild it: %w",
					saleID, st.Counter, st.Drift, flashline.ErrInvariantBroken)
			}
		}
	}
	sale, err := w.Store.SetSaleState(ctx, saleID, action)
	if err != nil {
		return sale, err
	}
	return w.Sale(ctx, saleID)
}
