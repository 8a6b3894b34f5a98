package postgres

import (
	"context"
	"fmt"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// What operators do to a sale after the click, on the admin pool: extend
// holds when payment is slow, void orders. Each change and its audit row
// (operator_actions) are one statement (sql/queries/operations.sql).

var adminActor = flashline.Actor{Admin: true}

// ExtendSale extends every pending hold of saleID whose time is not up by
// seconds (each hold at most flashline.MaxExtensionTotal in all), in one
// statement that audits it under operator. Holds whose time is up are not
// revived.
func (s *Store) ExtendSale(ctx context.Context, saleID string, seconds int, operator string) (flashline.ExtendResult, error) {
	if err := flashline.CheckExtendSeconds(seconds); err != nil {
		return flashline.ExtendResult{}, err
	}
	if err := flashline.CheckOperator(operator); err != nil {
		return flashline.ExtendResult{}, err
	}
	row, err := dbsqlc.New(s.admin).SaleExtendHolds(ctx, dbsqlc.SaleExtendHoldsParams{
		Seconds: int32(seconds), SaleID: saleID, Operator: operator,
	})
	if err != nil {
		return flashline.ExtendResult{}, fmt.Errorf("extend holds of sale %s: %w", saleID, translate(err))
	}
	if row.Found == 0 {
		return flashline.ExtendResult{}, fmt.Errorf("extend holds of sale %s: %w", saleID, flashline.ErrNotFound)
	}
	return flashline.ExtendResult{SaleID: saleID, Seconds: seconds, Extended: int(row.Extended), AtCap: int(row.AtCap)}, nil
}

// ExtendReservation extends one pending hold by seconds, audited under
// operator. A hold that is not pending answers its state's error
// (ErrReservationExpired also for one past its time, not yet swept); one
// that had its whole extension, ErrExtensionLimit.
func (s *Store) ExtendReservation(ctx context.Context, reservationID string, seconds int, operator string) (flashline.Reservation, error) {
	if err := flashline.CheckExtendSeconds(seconds); err != nil {
		return flashline.Reservation{}, err
	}
	if err := flashline.CheckOperator(operator); err != nil {
		return flashline.Reservation{}, err
	}
	q := dbsqlc.New(s.admin)
	n, err := q.ReservationExtend(ctx, dbsqlc.ReservationExtendParams{Seconds: int32(seconds), ReservationID: reservationID, Operator: operator})
	if err != nil {
		return flashline.Reservation{}, fmt.Errorf("extend reservation %s: %w", reservationID, translate(err))
	}
	if n == 0 {
		why, err := q.ReservationExtensionState(ctx, dbsqlc.ReservationExtensionStateParams{ReservationID: reservationID})
		if err != nil {
			return flashline.Reservation{}, fmt.Errorf("extend reservation %s: %w", reservationID, translate(err))
		}
		r := flashline.Reservation{ID: reservationID, State: flashline.ReservationState(why.State)}
		switch {
		case r.State == flashline.ReservationPending && why.PastExpiry:
			err = flashline.ErrReservationExpired
		case r.State == flashline.ReservationPending:
			err = flashline.ErrExtensionLimit
		default:
			err = r.Err()
		}
		return flashline.Reservation{}, fmt.Errorf("extend reservation %s: %w", reservationID, err)
	}
	return s.Reservation(ctx, reservationID, adminActor)
}

// Void voids a confirmed order and returns its units to stock exactly once,
// however often and wherever it is called, with a 'void' ledger row and an
// audit row naming operator and reason. Voiding a voided order returns it
// as it is; a pending hold is ErrReservationNotConfirmed (cancel it); an
// expired or cancelled one, its state's error.
func (s *Store) Void(ctx context.Context, reservationID, reason, operator string) (flashline.Reservation, error) {
	if err := flashline.CheckVoidReason(reason); err != nil {
		return flashline.Reservation{}, err
	}
	if err := flashline.CheckOperator(operator); err != nil {
		return flashline.Reservation{}, err
	}
	r, err := s.Reservation(ctx, reservationID, adminActor)
	if err != nil {
		return r, err
	}
	if r.State == flashline.ReservationConfirmed {
		if _, err := dbsqlc.New(s.admin).ReservationVoid(ctx, dbsqlc.ReservationVoidParams{
			Reason: reason, ReservationID: reservationID, Operator: operator,
		}); err != nil {
			return r, fmt.Errorf("void reservation %s: %w", reservationID, translate(err))
		}
		// Matched or not (a concurrent void or refund won), the
		// reservation as it now stands is the answer.
		if r, err = s.Reservation(ctx, reservationID, adminActor); err != nil {
			return r, err
		}
	}
	switch r.State {
	case flashline.ReservationVoided:
		return r, nil
	case flashline.ReservationPending:
		return r, fmt.Errorf("void reservation %s: %w", reservationID, flashline.ErrReservationNotConfirmed)
	}
	return r, fmt.Errorf("void reservation %s: %w", reservationID, r.Err())
}
