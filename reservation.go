package flashline

import (
	"encoding/json"
	"time"
)

// ReservationState is the state of a reservation.
type ReservationState string

// Reservation states.
const (
	ReservationPending   ReservationState = "pending"
	ReservationConfirmed ReservationState = "confirmed"
	ReservationExpired   ReservationState = "expired"
	ReservationCancelled ReservationState = "cancelled"
	// ReservationVoided is an order undone after confirmation (an
	// operator's void, or a refund): its units are back in stock.
	ReservationVoided ReservationState = "voided"
)

// Limits on a reserve request.
const (
	MaxIdempotencyKeyLen = 255
	MaxCustomerIDLen     = 128
)

// Reservation is a hold on units of a sale.
type Reservation struct {
	ID         string
	SaleID     string
	CustomerID string
	Quantity   int
	// Variant is the SKU of the variant reserved ("" in a sale without
	// variants).
	Variant     string
	State       ReservationState
	CreatedAt   time.Time
	ExpiresAt   time.Time
	ConfirmedAt *time.Time
	OrderID     string
	// Confirmation is who confirms the holds of the reservation's sale.
	Confirmation Confirmation
	// PaymentReference is the payment that confirmed the order ("" when its
	// customer confirmed it, or it is not confirmed).
	PaymentReference string
	// VoidedAt and VoidReason are set once the order was voided.
	VoidedAt   *time.Time
	VoidReason string
}

// Err is the error for acting on a reservation that is no longer pending
// (nil while it is).
func (r Reservation) Err() error {
	switch r.State {
	case ReservationExpired:
		return ErrReservationExpired
	case ReservationCancelled:
		return ErrReservationCancelled
	case ReservationConfirmed:
		return ErrReservationConfirmed
	case ReservationVoided:
		return ErrReservationVoided
	}
	return nil
}

// Receipt is the answer to a reservation attempt that took stock: stored
// under its idempotency key in the same transaction as the reservation, and
// replayed byte for byte to every retry with that key. It is also the start
// of the reservation object every other answer shows.
type Receipt struct {
	ReservationID string `json:"reservationId"`
	SaleID        string `json:"saleId"`
	Quantity      int    `json:"quantity"`
	// Variant is left out in a sale without variants, so that its receipts
	// are the bytes they were before variants.
	Variant   string           `json:"variant,omitempty"`
	State     ReservationState `json:"state"`
	ExpiresAt string           `json:"expiresAt"` // RFC 3339, UTC, to the second
}

// NewReceipt is r's receipt.
func NewReceipt(r Reservation) Receipt {
	return Receipt{
		ReservationID: r.ID,
		SaleID:        r.SaleID,
		Quantity:      r.Quantity,
		Variant:       r.Variant,
		State:         r.State,
		ExpiresAt:     r.ExpiresAt.UTC().Format(time.RFC3339),
	}
}

// Bytes is the receipt as stored and answered: JSON.
func (rc Receipt) Bytes() []byte {
	b, err := json.Marshal(rc)
	if err != nil {
		panic(err) // strings and an int cannot fail to encode
	}
	return b
}

// ReserveRequest is one customer's attempt to reserve units.
type ReserveRequest struct {
	SaleID         string
	CustomerID     string
	IdempotencyKey string
	Quantity       int
	// Variant is the SKU of the variant to reserve: required by a sale with
	// variants, "" for a sale without.
	Variant string
	// AdmissionToken is the X-Admission-Token header, required by sales
	// that admit through their waiting room.
	AdmissionToken string
	// AdmissionID is the single-use id of AdmissionToken once its signature,
	// expiry, sale and customer have been checked; "" when the token is
	// absent or not valid for this request.
	AdmissionID string
	// AdmissionVariant is the variant AdmissionToken's "variant" claim
	// names, once checked as AdmissionID is: a lottery winner's, in a
	// lottery with variants, who may reserve that variant only
	// (ErrVariantNotWon otherwise); "" for any other admission.
	AdmissionVariant string
	// PaymentInstrument is the customer token's payment_instrument claim,
	// normalised (NormalizeInstrument); "" when absent (never the body's:
	// the shopper's word). Sales with a per-instrument limit count units
	// against it; the payment is counted again, on the instrument the
	// provider reports (PaymentEvent.Instrument).
	PaymentInstrument string
	// AccountCreated is when the customer's account was made (zero when the
	// token does not say), checked against the sale's minimum account age.
	AccountCreated time.Time
	// Fingerprint identifies the request body: the same key with a different
	// fingerprint is ErrIdempotencyKeyReused.
	Fingerprint []byte
	// GateSeq is the number of the unit a gated sale's gate handed out for
	// this request (0: the sale has no gate); the reservation records it.
	GateSeq int64
}

// ReserveResult is the outcome of a successful reserve: a new reservation
// and its receipt, or the receipt stored for an earlier request with the
// same key.
type ReserveResult struct {
	// Reservation is the new reservation; zero when Replayed.
	Reservation Reservation
	// Receipt is the answer's body, byte for byte what was stored.
	Receipt  []byte
	Replayed bool
}
