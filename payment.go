package flashline

import (
	"strconv"
	"time"
)

// PaymentEventType is the kind of a payment event.
type PaymentEventType string

// The payment events Flashline applies.
const (
	// PaymentSucceeded confirms a pending hold (or, for a hold that is no
	// longer pending, records a late payment to refund).
	PaymentSucceeded PaymentEventType = "payment.succeeded"
	// PaymentFailed cancels a pending hold; its units return once.
	PaymentFailed PaymentEventType = "payment.failed"
	// RefundSucceeded voids a confirmed order (its units return once), or
	// closes a late payment that was refunded.
	RefundSucceeded PaymentEventType = "refund.succeeded"
	// InstrumentReported is a provider's report of the instrument that
	// paid (PaymentReference), in an event apart from the payment's success
	// (Stripe's charge.succeeded): it applies the success that waited for
	// it (OutcomeAwaitingInstrument), or waits for that success; with no
	// Instrument, the provider reported none (a payment method without a
	// fingerprint) and the success waits no more. Made by the
	// providers' webhooks only; Flashline's own events give the instrument
	// with the success.
	InstrumentReported PaymentEventType = "payment.instrument"
)

// Limits on a payment event.
const (
	MaxPaymentEventIDLen   = 255
	MaxPaymentReferenceLen = 255
	// MaxPaymentAmount bounds amount (minor units), far above any price.
	MaxPaymentAmount = 1_000_000_000_000
	MaxPaymentReason = 500
)

// PaymentEvent is one event from the payment side, already authenticated
// (its signature checked) and decoded.
type PaymentEvent struct {
	// ID is the provider's event id: an event is applied once per id.
	ID   string
	Type PaymentEventType
	// ReservationID is the hold the payment is for.
	ReservationID string
	// PaymentReference is the provider's id of the payment (required for
	// payment.succeeded and refund.succeeded).
	PaymentReference string
	// Amount (minor units) and Currency (three letters) as the provider gave
	// them; stored, and checked against the hold's price when its sale
	// states one (Price.Pays).
	Amount   *int64
	Currency string
	// Reason is a failure's or a refund's reason, for people ("" when none).
	Reason string
	// Hash identifies the event's body: the same id with another body is
	// ErrEventIDReused.
	Hash []byte
	// Instrument is the payment instrument the provider reported
	// (NormalizeInstrument's form; "" when it reported none): a sale's
	// perInstrumentLimit counts the orders each instrument paid for. Only
	// the payment side names it, never the shopper.
	Instrument string
	// AwaitInstrument: the provider reports the instrument in an event of
	// its own (InstrumentReported), so a success without one waits for it
	// in a sale with a perInstrumentLimit.
	AwaitInstrument bool
}

// Validate checks an event's fields. Any failure is an *InvalidError,
// except an id that cannot be a reservation's, which is
// ErrUnknownReservation.
func (e PaymentEvent) Validate() error {
	switch {
	case e.ID == "" || len(e.ID) > MaxPaymentEventIDLen || !printableASCII(e.ID):
		return Invalid("id must be 1-255 printable ASCII characters")
	case e.Type != PaymentSucceeded && e.Type != PaymentFailed && e.Type != RefundSucceeded && e.Type != InstrumentReported:
		return Invalid(`type must be "payment.succeeded", "payment.failed" or "refund.succeeded"`)
	case e.ReservationID == "":
		return Invalid("data.reservationId is required")
	case e.PaymentReference == "" && e.Type != PaymentFailed:
		return Invalid("data.paymentReference is required for " + string(e.Type))
	case len(e.PaymentReference) > MaxPaymentReferenceLen || !printableASCII(e.PaymentReference):
		return Invalid("data.paymentReference must be 1-255 printable ASCII characters")
	case e.Amount != nil && (*e.Amount < 0 || *e.Amount > MaxPaymentAmount):
		return Invalid("data.amount must be between 0 and " + strconv.Itoa(MaxPaymentAmount) + " (minor units)")
	case e.Currency != "" && !isCurrency(e.Currency):
		return Invalid("data.currency must be three letters (ISO 4217)")
	case len(e.Instrument) > MaxInstrumentLen || !ValidText(e.Instrument):
		return Invalid("data.paymentInstrument must be at most 255 bytes of text")
	case len(e.Reason) > MaxPaymentReason || !ValidText(e.Reason):
		return Invalid("data.reason must be at most 500 characters of text")
	case !ValidID(ReservationIDPrefix, e.ReservationID):
		return ErrUnknownReservation
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// PaymentOutcome is what a payment event did.
type PaymentOutcome string

// Payment outcomes.
const (
	// OutcomeConfirmed: the pending hold became an order.
	OutcomeConfirmed PaymentOutcome = "confirmed"
	// OutcomeAlreadyConfirmed: the order exists, paid by this payment.
	OutcomeAlreadyConfirmed PaymentOutcome = "already_confirmed"
	// OutcomeLatePayment: the hold was no longer pending (or was paid by
	// another payment); no stock was taken, the payment is to be refunded.
	OutcomeLatePayment PaymentOutcome = "late_payment"
	// OutcomeCancelled: the failed payment cancelled the pending hold.
	OutcomeCancelled PaymentOutcome = "cancelled"
	// OutcomeVoided: the refund voided the order.
	OutcomeVoided PaymentOutcome = "voided"
	// OutcomeRefundRecorded: the refund closed a late payment.
	OutcomeRefundRecorded PaymentOutcome = "refund_recorded"
	// OutcomeNoEffect: nothing to do (a failure after the hold ended, a
	// refund of an order voided already, ...).
	OutcomeNoEffect PaymentOutcome = "no_effect"
	// OutcomeInstrumentLimit: the instrument that paid has paid for the
	// sale's perInstrumentLimit already: the hold is cancelled (its units
	// back once) and the payment recorded to refund (LateInstrumentLimit).
	OutcomeInstrumentLimit PaymentOutcome = "instrument_limit"
	// OutcomeAwaitingInstrument: the payment succeeded in a sale with a
	// perInstrumentLimit, and its provider reports the instrument in an
	// event of its own that has not arrived: nothing confirmed yet; that
	// event applies this one.
	OutcomeAwaitingInstrument PaymentOutcome = "awaiting_instrument"
	// OutcomeInstrumentRecorded: an instrument's report that arrived before
	// its payment's success, kept for it.
	OutcomeInstrumentRecorded PaymentOutcome = "instrument_recorded"
)

// PaymentResult is the answer to a payment event.
type PaymentResult struct {
	EventID       string
	Type          PaymentEventType
	Outcome       PaymentOutcome
	ReservationID string
	// SaleID is the reservation's sale ("" for an unknown reservation).
	SaleID string
	// State is the reservation's state after the event ("" on a replay).
	State ReservationState
	// OrderID is the order a payment confirmed, or the one a refund voided.
	OrderID string
	// Replayed: the event id was applied before; this delivery changed
	// nothing and the first outcome is answered.
	Replayed bool
	// ClaimedInstrument and Instrument, set only when they disagree: the
	// instrument the hold was made with (the customer token's
	// payment_instrument claim) and the one the provider reported paying.
	// The provider's counted for the limit (and is the order's from then
	// on); the disagreement is for an operator to see (a token naming a
	// card the customer did not pay with).
	ClaimedInstrument, Instrument string
	// OverdueForInstrument, for a success that waits for its instrument's
	// report (OutcomeAwaitingInstrument): how many other successes of the
	// sale have waited for theirs longer than InstrumentReportOverdue while
	// no report for the sale came. More than 0 says the provider's reports
	// do not come (a Stripe endpoint not subscribed to charge.succeeded).
	OverdueForInstrument int
}

// InstrumentReportOverdue is how long a payment's success may wait for the
// provider's separate report of its instrument (Stripe's charge.succeeded,
// which comes within seconds of the PaymentIntent's success) before an
// instance warns that the reports do not come.
const InstrumentReportOverdue = 5 * time.Minute

// InstrumentReportWindow is how far back that warning looks at successes
// waiting for their report: a hold that expired without its report waits
// for ever, and the read stays bounded.
const InstrumentReportWindow = time.Hour

// InstrumentMismatch reports whether applying the event found the token's
// claimed instrument and the provider's reported one to disagree.
func (r PaymentResult) InstrumentMismatch() bool {
	return !r.Replayed && r.ClaimedInstrument != "" && r.Instrument != ""
}

// ReturnedUnits reports whether applying the event returned the
// reservation's units to stock: a failed payment that cancelled its hold, a
// payment over its instrument's limit that did, or a refund that voided its
// order (a replay changed nothing).
func (r PaymentResult) ReturnedUnits() bool {
	return !r.Replayed && (r.Outcome == OutcomeCancelled || r.Outcome == OutcomeVoided || r.Outcome == OutcomeInstrumentLimit)
}

// ToRefund reports whether applying the event recorded a payment to refund
// (a late payment, or one over its instrument's limit).
func (r PaymentResult) ToRefund() bool {
	return !r.Replayed && (r.Outcome == OutcomeLatePayment || r.Outcome == OutcomeInstrumentLimit)
}

// LateReason is why a payment is late.
type LateReason string

// Late payment reasons.
const (
	LateHoldExpired      LateReason = "hold_expired"
	LateHoldCancelled    LateReason = "hold_cancelled"
	LateHoldVoided       LateReason = "hold_voided"
	LateDuplicatePayment LateReason = "duplicate_payment"
	// LateAmountMismatch: the sale states a price and the payment did not
	// pay it (another amount or currency, or none given).
	LateAmountMismatch LateReason = "amount_mismatch"
	// LateInstrumentLimit: the instrument the provider reported had paid
	// for the sale's perInstrumentLimit already; the hold was cancelled.
	LateInstrumentLimit LateReason = "instrument_limit"
)

// LatePayment is a payment that arrived when its hold could no longer take
// it: to be refunded.
type LatePayment struct {
	EventID          string
	ReservationID    string
	SaleID           string
	PaymentReference string
	Amount           *int64
	Currency         string
	Reason           LateReason
	ReceivedAt       time.Time
	RefundedAt       *time.Time
	RefundEventID    string
}

// Operators' limits.
const (
	// MaxExtendSeconds is the most one extension adds to a hold.
	MaxExtendSeconds = 3600
	// MaxExtensionTotal is the most a hold may be extended in all: a day
	// over its original time.
	MaxExtensionTotal = 86400
	// MaxVoidReasonLen bounds a void's reason.
	MaxVoidReasonLen = 500
	// MaxOperatorLen bounds an operator's name.
	MaxOperatorLen = 128
	// MaxBulkVoid is the most reservations one bulk void names.
	MaxBulkVoid = 1000
)

// DefaultOperator names the operator of an admin API call that names none
// (the admin token is shared and names nobody).
const DefaultOperator = "admin"

// CheckOperator checks an operator's name: 1-128 characters of text.
func CheckOperator(name string) error {
	if name == "" || len(name) > MaxOperatorLen || !ValidText(name) {
		return Invalid("operator must be 1-128 characters of text")
	}
	return nil
}

// CheckVoidReason checks a void's reason: 1-500 characters of text.
func CheckVoidReason(reason string) error {
	if reason == "" || len(reason) > MaxVoidReasonLen || !ValidText(reason) {
		return Invalid("reason must be 1-500 characters of text")
	}
	return nil
}

// CheckExtendSeconds checks an extension: 1 to MaxExtendSeconds.
func CheckExtendSeconds(seconds int) error {
	if seconds < 1 || seconds > MaxExtendSeconds {
		return Invalid("seconds must be between 1 and 3600")
	}
	return nil
}

// ExtendResult is what extending a sale's holds did.
type ExtendResult struct {
	SaleID  string
	Seconds int
	// Extended is how many pending holds were extended.
	Extended int
	// AtCap is how many of them have now had MaxExtensionTotal.
	AtCap int
}
