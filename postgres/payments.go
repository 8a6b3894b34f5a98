package postgres

import (
	"bytes"
	"context"
	"fmt"

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
		orderID, err := q.ReservationConfirmByPayment(ctx, dbsqlc.ReservationConfirmByPaymentParams{
			OrderID:          flashline.NewID(flashline.OrderIDPrefix),
			PaymentReference: e.PaymentReference,
			EventID:          e.ID,
			Amount:           e.Amount,
			Currency:         optional(e.Currency),
			ReservationID:    e.ReservationID,
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
