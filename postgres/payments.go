package postgres

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// ApplyPaymentEvent applies an authenticated payment event, once per event
// id, in one transaction on the admin pool (sql/queries/payments.sql says
// why it is safe under concurrency):
//
//   - payment.succeeded on a pending hold whose time is not up (and, when
//     its sale states a price, that pays quantity x price in its currency):
//     confirmed, its order created with the payment reference, amount and
//     currency; one that pays another amount confirms nothing and is a late
//     payment to refund (LateAmountMismatch); one whose refund was applied
//     before it (the provider delivered them out of order) has no effect;
//     on a hold that expired (swept or not), was cancelled or voided, or on
//     an order paid by another payment: no stock is taken, the payment is
//     recorded as a late payment to refund (OutcomeLatePayment);
//   - payment.failed on a pending hold: cancelled, its units back once (the
//     restocked_at rule, as for cancel and expiry);
//   - refund.succeeded on an order paid by this payment (or confirmed by its
//     customer): voided, its units back once; for a late payment: marked
//     refunded.
//
// In a sale with a per-instrument limit, a payment.succeeded whose
// instrument (as its provider reported it, never as the shopper said) has
// paid for the limit already confirms nothing: its hold is cancelled, its
// units back once, and the payment recorded to refund
// (OutcomeInstrumentLimit, LateInstrumentLimit). The instrument's payments
// in the sale are taken one at a time, on any instance (an advisory lock
// after the reservation's). A provider that reports the instrument in an
// event of its own (AwaitInstrument; InstrumentReported) has the two meet
// by the payment reference in either order: the first waits in the
// database for the second, which applies the payment.
//
// The reservation is locked first, then the event's row is written: it is
// the idempotency. A second delivery of the same id answers the first
// outcome (Replayed) and changes nothing; the same id with another body is
// ErrEventIDReused. An unknown reservation (ErrUnknownReservation) writes
// nothing.
func (s *Store) ApplyPaymentEvent(ctx context.Context, e flashline.PaymentEvent) (flashline.PaymentResult, error) {
	res := flashline.PaymentResult{EventID: e.ID, Type: e.Type, ReservationID: e.ReservationID}
	if err := e.Validate(); err != nil {
		return res, err
	}
	err := withTx(ctx, s.admin, func(q *dbsqlc.Queries) error {
		// The reservation first (an unknown one: nothing written), then the
		// event's row (sql/queries/payments.sql says why in this order).
		r, err := q.ReservationLockForPayment(ctx, dbsqlc.ReservationLockForPaymentParams{ReservationID: e.ReservationID})
		if notFound(err) {
			return flashline.ErrUnknownReservation
		}
		if err != nil {
			return err
		}
		res.SaleID = r.SaleID
		if e.Type == flashline.InstrumentReported {
			return instrumentReported(ctx, q, e, r, &res)
		}
		_, err = q.PaymentEventInsert(ctx, dbsqlc.PaymentEventInsertParams{
			EventID:          e.ID,
			Type:             string(e.Type),
			ReservationID:    e.ReservationID,
			PaymentReference: optional(e.PaymentReference),
			Amount:           e.Amount,
			Currency:         optional(e.Currency),
			RequestHash:      e.Hash,
		})
		if notFound(err) {
			return replay(ctx, q, e, &res)
		}
		if err != nil {
			return err
		}
		res.State = flashline.ReservationState(r.State)
		switch e.Type {
		case flashline.PaymentSucceeded:
			err = paymentSucceeded(ctx, q, e, r, &res)
		case flashline.PaymentFailed:
			err = paymentFailed(ctx, q, e, r, &res)
		case flashline.RefundSucceeded:
			err = refundSucceeded(ctx, q, e, r, &res)
		}
		if err != nil {
			return err
		}
		return q.PaymentEventSetOutcome(ctx, dbsqlc.PaymentEventSetOutcomeParams{
			Outcome: string(res.Outcome), OrderID: optional(res.OrderID), EventID: e.ID,
		})
	})
	if err != nil {
		return res, fmt.Errorf("payment event %s: %w", e.ID, translate(err))
	}
	return res, nil
}

// replay answers an event delivered before: its first outcome.
func replay(ctx context.Context, q *dbsqlc.Queries, e flashline.PaymentEvent, res *flashline.PaymentResult) error {
	prev, err := q.PaymentEventGet(ctx, dbsqlc.PaymentEventGetParams{EventID: e.ID})
	if err != nil {
		return err
	}
	if !bytes.Equal(prev.RequestHash, e.Hash) {
		return flashline.ErrEventIDReused
	}
	res.Replayed = true
	res.Type = flashline.PaymentEventType(prev.Type)
	res.ReservationID = prev.ReservationID
	if prev.Outcome != nil {
		res.Outcome = flashline.PaymentOutcome(*prev.Outcome)
	}
	if prev.OrderID != nil {
		res.OrderID = *prev.OrderID
	}
	return nil
}

func paymentSucceeded(ctx context.Context, q *dbsqlc.Queries, e flashline.PaymentEvent, r dbsqlc.ReservationLockForPaymentRow, res *flashline.PaymentResult) error {
	paidBy := func(ref string) bool { return r.PaymentReference != nil && *r.PaymentReference == ref }
	// A refund of this very payment came first (providers deliver events
	// separately, each retried on its own): the money is back with the
	// customer, so the payment confirms nothing and there is nothing left
	// to refund.
	refunded, err := q.PaymentRefundedBefore(ctx, dbsqlc.PaymentRefundedBeforeParams{
		ReservationID: e.ReservationID, PaymentReference: e.PaymentReference,
	})
	if err != nil {
		return err
	}
	if refunded {
		res.Outcome = flashline.OutcomeNoEffect
		return nil
	}
	var late flashline.LateReason
	switch flashline.ReservationState(r.State) {
	case flashline.ReservationPending:
		if r.PastExpiry {
			late = flashline.LateHoldExpired // its units are about to go back
			break
		}
		if p := priceFrom(r.PriceAmount, r.PriceCurrency); p != nil && !p.Pays(int(r.Quantity), e.Amount, e.Currency) {
			// The sale states a price and this payment did not pay it: the
			// hold stays pending (a right payment may still come), and this
			// money goes back.
			late = flashline.LateAmountMismatch
			break
		}
		instrument, outcome, err := instrumentCheck(ctx, q, e, r)
		if err != nil {
			return err
		}
		if claimed := deref(r.ClaimedInstrument); claimed != "" && instrument != "" && claimed != instrument {
			// The provider's word wins (instrumentCheck counted its
			// instrument); the token's disagreeing claim is told.
			res.ClaimedInstrument, res.Instrument = claimed, instrument
		}
		switch outcome {
		case flashline.OutcomeAwaitingInstrument:
			res.Outcome = outcome // the hold stays pending for the report
			// Do the reports come at all? Successes of the sale that
			// waited past the bound while none came say they do not.
			n, err := q.PaymentsOverdueForInstrument(ctx, dbsqlc.PaymentsOverdueForInstrumentParams{
				OverdueSeconds: int32(flashline.InstrumentReportOverdue / time.Second),
				WindowSeconds:  int32(flashline.InstrumentReportWindow / time.Second), EventID: e.ID, SaleID: r.SaleID,
			})
			res.OverdueForInstrument = int(n)
			return err
		case flashline.OutcomeInstrumentLimit:
			restocked, err := q.ReservationCancel(ctx, dbsqlc.ReservationCancelParams{ReservationID: e.ReservationID})
			if err != nil {
				return err
			}
			if restocked != 1 {
				// The reservation is locked and pending: its cancel matched.
				return fmt.Errorf("reservation %s: the cancel of a pending hold over its instrument's limit matched nothing", e.ReservationID)
			}
			_, err = q.LatePaymentInsert(ctx, dbsqlc.LatePaymentInsertParams{
				EventID:          e.ID,
				PaymentReference: e.PaymentReference,
				Amount:           e.Amount,
				Currency:         optional(e.Currency),
				Reason:           string(flashline.LateInstrumentLimit),
				ReservationID:    e.ReservationID,
			})
			res.Outcome, res.State = outcome, flashline.ReservationCancelled
			return err
		}
		orderID, err := q.ReservationConfirmByPayment(ctx, dbsqlc.ReservationConfirmByPaymentParams{
			OrderID:           flashline.NewID(flashline.OrderIDPrefix),
			PaymentReference:  e.PaymentReference,
			EventID:           e.ID,
			Amount:            e.Amount,
			Currency:          optional(e.Currency),
			ReservationID:     e.ReservationID,
			PaymentInstrument: optional(instrument),
		})
		if err != nil {
			return err // the reservation is locked and pending: it matched, or the order's constraints refused
		}
		res.Outcome, res.OrderID, res.State = flashline.OutcomeConfirmed, orderID, flashline.ReservationConfirmed
		return nil
	case flashline.ReservationConfirmed:
		if paidBy(e.PaymentReference) {
			res.Outcome, res.OrderID = flashline.OutcomeAlreadyConfirmed, deref(r.OrderID)
			return nil
		}
		late = flashline.LateDuplicatePayment
	case flashline.ReservationExpired:
		late = flashline.LateHoldExpired
	case flashline.ReservationCancelled:
		late = flashline.LateHoldCancelled
	case flashline.ReservationVoided:
		if paidBy(e.PaymentReference) {
			// The payment of the order that was voided since: it is the
			// refund's business, not a new payment.
			res.Outcome, res.OrderID = flashline.OutcomeNoEffect, deref(r.OrderID)
			return nil
		}
		late = flashline.LateHoldVoided
	default:
		return fmt.Errorf("reservation %s in unknown state %q", r.ReservationID, r.State)
	}
	n, err := q.LatePaymentInsert(ctx, dbsqlc.LatePaymentInsertParams{
		EventID:          e.ID,
		PaymentReference: e.PaymentReference,
		Amount:           e.Amount,
		Currency:         optional(e.Currency),
		Reason:           string(late),
		ReservationID:    e.ReservationID,
	})
	res.Outcome = flashline.OutcomeLatePayment
	if n == 0 {
		// This payment was recorded as late already, by another event.
		res.Outcome = flashline.OutcomeNoEffect
	}
	return err
}

// instrumentCheck is the per-instrument limit of a payment about to confirm
// a pending hold: the instrument that paid (the event's, or the one its
// provider reported apart, PaymentInstrumentGet), and an outcome when the
// payment must not confirm: OutcomeAwaitingInstrument when the instrument
// is still to be reported, OutcomeInstrumentLimit when the instrument's
// confirmed orders in the sale and this hold would pass the limit. A sale
// without a limit, or a payment whose provider reports no instrument, is
// not checked.
func instrumentCheck(ctx context.Context, q *dbsqlc.Queries, e flashline.PaymentEvent, r dbsqlc.ReservationLockForPaymentRow) (string, flashline.PaymentOutcome, error) {
	instrument := e.Instrument
	if r.PerInstrumentLimit <= 0 {
		return instrument, "", nil
	}
	if instrument == "" {
		got, err := q.PaymentInstrumentGet(ctx, dbsqlc.PaymentInstrumentGetParams{
			PaymentReference: e.PaymentReference, ReservationID: e.ReservationID,
		})
		switch {
		case err == nil:
			instrument = deref(got) // reported, or reported as none
		case !notFound(err):
			return "", "", err
		case e.AwaitInstrument:
			return "", flashline.OutcomeAwaitingInstrument, nil
		default:
			return "", "", nil
		}
	}
	if instrument == "" {
		return "", "", nil // none to count
	}
	if err := q.InstrumentLockForPayment(ctx, dbsqlc.InstrumentLockForPaymentParams{
		SaleID: r.SaleID, Instrument: instrument,
	}); err != nil {
		return "", "", err
	}
	// A statement after the lock: its snapshot sees every order of the
	// instrument committed before the lock was granted.
	paid, err := q.InstrumentPaidUnits(ctx, dbsqlc.InstrumentPaidUnitsParams{Instrument: instrument, SaleID: r.SaleID})
	if err != nil {
		return "", "", err
	}
	if paid+r.Quantity > r.PerInstrumentLimit {
		return instrument, flashline.OutcomeInstrumentLimit, nil
	}
	return instrument, "", nil
}

// instrumentReported applies a provider's report of the instrument that
// paid (e.PaymentReference), the reservation locked: recorded once (a
// second report of the payment is a replay), then the payment's success,
// if it arrived first and waits for it, is applied with it, as its own
// event (its id, its outcome written on its row).
func instrumentReported(ctx context.Context, q *dbsqlc.Queries, e flashline.PaymentEvent, r dbsqlc.ReservationLockForPaymentRow, res *flashline.PaymentResult) error {
	n, err := q.PaymentInstrumentInsert(ctx, dbsqlc.PaymentInstrumentInsertParams{
		PaymentReference: e.PaymentReference, Instrument: optional(e.Instrument), EventID: e.ID, ReservationID: e.ReservationID,
	})
	if err != nil {
		return err
	}
	res.State = flashline.ReservationState(r.State)
	if n == 0 {
		res.Replayed, res.Outcome, res.State = true, flashline.OutcomeNoEffect, ""
		return nil
	}
	w, err := q.PaymentAwaitingInstrument(ctx, dbsqlc.PaymentAwaitingInstrumentParams{
		ReservationID: e.ReservationID, PaymentReference: e.PaymentReference,
	})
	if notFound(err) {
		res.Outcome = flashline.OutcomeInstrumentRecorded
		return nil
	}
	if err != nil {
		return err
	}
	paid := flashline.PaymentEvent{
		ID: w.EventID, Type: flashline.PaymentSucceeded, ReservationID: e.ReservationID,
		PaymentReference: e.PaymentReference, Amount: w.Amount, Currency: deref(w.Currency),
		Instrument: e.Instrument,
	}
	res.Type = flashline.PaymentSucceeded
	if err := paymentSucceeded(ctx, q, paid, r, res); err != nil {
		return err
	}
	return q.PaymentEventSetOutcome(ctx, dbsqlc.PaymentEventSetOutcomeParams{
		Outcome: string(res.Outcome), OrderID: optional(res.OrderID), EventID: paid.ID,
	})
}

func paymentFailed(ctx context.Context, q *dbsqlc.Queries, e flashline.PaymentEvent, r dbsqlc.ReservationLockForPaymentRow, res *flashline.PaymentResult) error {
	res.Outcome = flashline.OutcomeNoEffect
	if flashline.ReservationState(r.State) != flashline.ReservationPending {
		return nil
	}
	restocked, err := q.ReservationCancel(ctx, dbsqlc.ReservationCancelParams{ReservationID: e.ReservationID})
	if err != nil {
		return err
	}
	if restocked == 1 {
		res.Outcome, res.State = flashline.OutcomeCancelled, flashline.ReservationCancelled
	}
	return nil
}

func refundSucceeded(ctx context.Context, q *dbsqlc.Queries, e flashline.PaymentEvent, r dbsqlc.ReservationLockForPaymentRow, res *flashline.PaymentResult) error {
	res.Outcome = flashline.OutcomeNoEffect
	ofOrder := r.PaymentReference == nil || *r.PaymentReference == e.PaymentReference
	if flashline.ReservationState(r.State) == flashline.ReservationConfirmed && ofOrder {
		reason := "refund " + e.PaymentReference
		if e.Reason != "" {
			reason += ": " + e.Reason
		}
		voided, err := q.ReservationVoid(ctx, dbsqlc.ReservationVoidParams{
			Reason:        truncate(reason, flashline.MaxVoidReasonLen),
			ReservationID: e.ReservationID,
			Operator:      truncate("payment event "+e.ID, flashline.MaxOperatorLen),
		})
		if err != nil {
			return err
		}
		if voided == 1 {
			res.Outcome, res.OrderID, res.State = flashline.OutcomeVoided, deref(r.OrderID), flashline.ReservationVoided
		}
		return nil
	}
	// Not the order's payment: a late payment of this reservation, refunded.
	n, err := q.LatePaymentRefund(ctx, dbsqlc.LatePaymentRefundParams{
		RefundEventID: e.ID, ReservationID: e.ReservationID, PaymentReference: e.PaymentReference,
	})
	if err != nil {
		return err
	}
	if n > 0 {
		res.Outcome = flashline.OutcomeRefundRecorded
	}
	return nil
}

// LatePayments lists late payments, newest first.
func (s *Store) LatePayments(ctx context.Context, includeRefunded bool, limit int) ([]flashline.LatePayment, error) {
	rows, err := dbsqlc.New(s.admin).LatePaymentsList(ctx, dbsqlc.LatePaymentsListParams{IncludeRefunded: includeRefunded, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("late payments: %w", translate(err))
	}
	out := make([]flashline.LatePayment, len(rows))
	for i, r := range rows {
		out[i] = flashline.LatePayment{
			EventID:          r.EventID,
			ReservationID:    r.ReservationID,
			SaleID:           r.SaleID,
			PaymentReference: r.PaymentReference,
			Amount:           r.Amount,
			Currency:         deref(r.Currency),
			Reason:           flashline.LateReason(r.Reason),
			ReceivedAt:       r.CreatedAt,
			RefundedAt:       r.RefundedAt,
			RefundEventID:    deref(r.RefundEventID),
		}
	}
	return out, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
