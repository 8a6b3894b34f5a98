package postgres

import (
	"context"
	"fmt"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// Reservation reads a reservation that by may see.
func (s *Store) Reservation(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	row, err := dbsqlc.New(s.admin).ReservationGet(ctx, dbsqlc.ReservationGetParams{ReservationID: reservationID})
	if err != nil {
		return flashline.Reservation{}, fmt.Errorf("reservation %s: %w", reservationID, translate(err))
	}
	if !by.CanAct(row.CustomerID) {
		// Someone else's reservation is not theirs to know about.
		return flashline.Reservation{}, fmt.Errorf("reservation %s: %w", reservationID, flashline.ErrNotFound)
	}
	return reservationFromRow(row), nil
}

// CustomerReservation is the customer's active reservation in a sale: how a
// customer who lost the answer to their reservation (a closed tab, a
// crashed app) finds the hold that holds their limit.
func (s *Store) CustomerReservation(ctx context.Context, saleID string, by flashline.Actor) (flashline.Reservation, error) {
	if by.CustomerID == "" {
		return flashline.Reservation{}, fmt.Errorf("the reservation in sale %s: %w", saleID, flashline.ErrNotFound)
	}
	row, err := dbsqlc.New(s.admin).ReservationOfCustomer(ctx, dbsqlc.ReservationOfCustomerParams{SaleID: saleID, CustomerID: by.CustomerID})
	if err != nil {
		return flashline.Reservation{}, fmt.Errorf("the reservation in sale %s: %w", saleID, translate(err))
	}
	return reservationFromRow(dbsqlc.ReservationGetRow(row)), nil
}

// pastExpiry reads whether a pending reservation's time is up (by the
// database's clock), for the answer to a confirm.
func (s *Store) pastExpiry(ctx context.Context, reservationID string) (bool, error) {
	row, err := dbsqlc.New(s.admin).ReservationGet(ctx, dbsqlc.ReservationGetParams{ReservationID: reservationID})
	if err != nil {
		return false, fmt.Errorf("reservation %s: %w", reservationID, translate(err))
	}
	return row.PastExpiry, nil
}

func reservationFromRow(row dbsqlc.ReservationGetRow) flashline.Reservation {
	r := flashline.Reservation{
		ID:           row.ReservationID,
		SaleID:       row.SaleID,
		CustomerID:   row.CustomerID,
		Quantity:     int(row.Quantity),
		State:        flashline.ReservationState(row.State),
		CreatedAt:    row.CreatedAt,
		ExpiresAt:    row.ExpiresAt.UTC(),
		ConfirmedAt:  row.ConfirmedAt,
		Confirmation: flashline.Confirmation(row.Confirmation),
		VoidedAt:     row.VoidedAt,
	}
	if row.OrderID != nil {
		r.OrderID = *row.OrderID
	}
	if row.PaymentReference != nil {
		r.PaymentReference = *row.PaymentReference
	}
	if row.VoidReason != nil {
		r.VoidReason = *row.VoidReason
	}
	if row.Variant != nil {
		r.Variant = *row.Variant
	}
	return r
}

// Confirm turns a pending reservation into an order, once: repeating it
// returns the same order. Only in a sale whose customers confirm their
// holds: in a sale confirmed by payment, a pending hold answers
// ErrPaymentRequired (the payment event confirms it, ApplyPaymentEvent), and
// one that is confirmed already answers its order, as here.
func (s *Store) Confirm(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	r, err := s.Reservation(ctx, reservationID, by)
	if err != nil {
		return r, err
	}
	if r.State == flashline.ReservationPending && r.Confirmation == flashline.ConfirmByPayment {
		past, err := s.pastExpiry(ctx, reservationID)
		if err != nil {
			return r, err
		}
		if past {
			return r, flashline.ErrReservationExpired // not yet swept
		}
		return r, fmt.Errorf("confirm reservation %s: %w", reservationID, flashline.ErrPaymentRequired)
	}
	if r.State == flashline.ReservationPending {
		_, err := dbsqlc.New(s.admin).ReservationConfirm(ctx, dbsqlc.ReservationConfirmParams{
			OrderID: flashline.NewID(flashline.OrderIDPrefix), ReservationID: reservationID,
		})
		if err != nil && !notFound(err) {
			return r, fmt.Errorf("confirm reservation %s: %w", reservationID, translate(err))
		}
		// Matched or not (a concurrent confirm or cancel won, or it expired),
		// the reservation as it now stands is the answer.
		if r, err = s.Reservation(ctx, reservationID, by); err != nil {
			return r, err
		}
	}
	switch {
	case r.State == flashline.ReservationConfirmed:
		return r, nil
	case r.State == flashline.ReservationPending:
		return r, flashline.ErrReservationExpired // past expires_at, not yet swept
	}
	return r, r.Err()
}

// Cancel cancels a pending reservation and returns its units to stock exactly
// once, however often and wherever it is called.
func (s *Store) Cancel(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	r, err := s.Reservation(ctx, reservationID, by)
	if err != nil {
		return r, err
	}
	if r.State == flashline.ReservationPending {
		if _, err := dbsqlc.New(s.admin).ReservationCancel(ctx, dbsqlc.ReservationCancelParams{ReservationID: reservationID}); err != nil {
			return r, fmt.Errorf("cancel reservation %s: %w", reservationID, translate(err))
		}
		if r, err = s.Reservation(ctx, reservationID, by); err != nil {
			return r, err
		}
	}
	if r.State == flashline.ReservationCancelled {
		return r, nil
	}
	return r, r.Err()
}
