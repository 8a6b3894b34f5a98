package flashline

import (
	"context"
	"errors"
	"fmt"
)

// Domain errors. Each maps to one error code of the HTTP contract
// (handlers/errors.go holds the table).
var (
	ErrNotFound              = errors.New("not found")
	ErrSoldOut               = errors.New("sold out")
	ErrLimitReached          = errors.New("per-customer limit reached")
	ErrSaleNotOpen           = errors.New("sale is not open")
	ErrRequestInProgress     = errors.New("a request with this idempotency key is in progress")
	ErrIdempotencyKeyReused  = errors.New("idempotency key reused with a different request")
	ErrReservationExpired    = errors.New("reservation expired")
	ErrReservationCancelled  = errors.New("reservation cancelled")
	ErrReservationConfirmed  = errors.New("reservation already confirmed")
	ErrInvalidTransition     = errors.New("sale cannot make that state change")
	ErrInvariantBroken       = errors.New("sale invariant does not hold")
	ErrUnavailable           = errors.New("stock cannot be counted right now")
	ErrOverloaded            = errors.New("overloaded")
	ErrAdmissionRequired     = errors.New("admission token required")
	ErrAdmissionInvalid      = errors.New("admission token invalid")
	ErrForbidden             = errors.New("forbidden")
	ErrIdempotencyKeyMissing = errors.New("idempotency key missing")
	ErrUnauthenticated       = errors.New("unauthenticated")
	ErrQuantityAboveLimit    = errors.New("quantity above the per-customer limit")
	ErrInvalidIdempotencyKey = errors.New("idempotency key must be 1-255 printable ASCII characters")
	ErrRateLimited           = errors.New("rate limited")
	// ErrTooManyInFlight: the customer already has as many requests in
	// flight as one customer may.
	ErrTooManyInFlight = errors.New("too many requests in flight for this account")
	// ErrAddressInFlight: the client address a trusted proxy forwards for
	// already has as many requests in flight as one address may.
	ErrAddressInFlight = errors.New("too many requests in flight from this address")
	ErrAccountTooNew   = errors.New("account too new for this sale")
	// ErrInstrumentLimitReached: the payment instrument holds the most units
	// the sale allows one instrument.
	ErrInstrumentLimitReached = errors.New("payment instrument limit reached")
	ErrNoWaitingRoom          = errors.New("sale has no waiting room")
	// ErrCrowdCommitted: a pre-open holder written after the room froze and
	// committed its pre-open crowd (crowddraw.go).
	ErrCrowdCommitted = errors.New("the waiting room's pre-open crowd is committed")
	// ErrPaymentRequired: the sale's holds are confirmed by payment events,
	// not by the customer (Confirmation).
	ErrPaymentRequired = errors.New("the sale's holds are confirmed by payment")
	// ErrReservationVoided: the order was voided after confirmation.
	ErrReservationVoided = errors.New("reservation voided")
	// ErrReservationNotConfirmed: voiding a hold that is still pending (cancel
	// it instead).
	ErrReservationNotConfirmed = errors.New("reservation is not confirmed")
	// ErrExtensionLimit: the hold has had the most extension it may have.
	ErrExtensionLimit = errors.New("reservation extended as far as it may be")
	// ErrUnknownReservation: a payment event about a reservation that does
	// not exist.
	ErrUnknownReservation = errors.New("payment event for an unknown reservation")
	// ErrEventIDReused: a payment event id delivered again with another body.
	ErrEventIDReused = errors.New("payment event id reused with a different event")
	// ErrPaymentsNotConfigured: this instance has no payment webhook secret,
	// so it can neither check payment events nor create sales that need
	// them.
	ErrPaymentsNotConfigured = errors.New("payment events are not configured")
	// ErrProviderNotConfigured: a payment provider's webhook (POST
	// /payments/stripe, /payments/adyen) reached an instance without that
	// provider's secret.
	ErrProviderNotConfigured = errors.New("this payment provider's webhook is not configured")
	// ErrSignatureInvalid and ErrSignatureExpired: a payment event whose
	// Flashline-Signature is missing, malformed or wrong, or whose timestamp
	// is outside the tolerance.
	ErrSignatureInvalid = errors.New("payment event signature invalid")
	ErrSignatureExpired = errors.New("payment event signature timestamp outside the tolerance")
	// ErrSaleNotPaused: a repair needs the sale paused (by the invariant
	// job or an admin), so that nobody buys from stock being corrected.
	ErrSaleNotPaused = errors.New("the sale is not paused")
	// ErrRebuildRunning: a rebuild of a gated sale's counter asked for while
	// another of the same sale runs (on any instance, or the CLI).
	ErrRebuildRunning = errors.New("another rebuild of the sale's gate is running")
	// ErrPaymentReferenceUsed: a payment reference that confirmed another
	// order already.
	ErrPaymentReferenceUsed = errors.New("payment reference already confirmed another order")
	// ErrGateUnitReturned: the unit a sale's gate handed out for a request
	// was given back before the request could hold it; the gate hands out
	// another (package gate answers it, it never reaches a client).
	ErrGateUnitReturned = errors.New("the gate's unit for this request was given back")
	// ErrVariantSoldOut: the variant asked for has nothing left; others of
	// the sale may (ErrSoldOut is every variant sold out). errors.Is it
	// ErrSoldOut too, so that what handles a sold-out answer handles it.
	ErrVariantSoldOut = fmt.Errorf("variant sold out: %w", ErrSoldOut)
	// ErrVariantNotWon: a lottery winner's reservation names another
	// variant than the one they won (their admission reserves only that).
	ErrVariantNotWon = errors.New("the lottery's admission is for another variant")
)

// InvalidError is a request that is malformed or breaks a rule of the contract.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return e.Reason }

// Invalid returns an *InvalidError with the given reason.
func Invalid(reason string) error { return &InvalidError{Reason: reason} }

// ClientGone reports whether err is the cancellation of ctx, the request's
// context: its client went away (gave up, retried elsewhere) and took the
// request with it. That says nothing about the service: it is never
// ErrUnavailable (failing closed) nor ErrOverloaded. A deadline that ran
// out (context.DeadlineExceeded) is not this: that is the service being
// slow, and keeps its meaning.
func ClientGone(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && ctx.Err() != nil
}

// Unavailable is err as ErrUnavailable (stock cannot be counted: the request
// fails closed), unless it is only that ctx's client went away (ClientGone):
// then it is err as it is, which the HTTP layer counts as client_closed. The
// purchase path wraps what it cannot count with this, never with
// errors.Join(ErrUnavailable, err) directly.
func Unavailable(ctx context.Context, err error) error {
	if ClientGone(ctx, err) {
		return err
	}
	return errors.Join(ErrUnavailable, err)
}
