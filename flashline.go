// Package flashline is the domain of a flash-sale service for stores that run on
// one PostgreSQL primary: sales, reservations, orders and the errors the rest of
// the program speaks in. It imports no driver and no web framework; the postgres
// package implements the Store below and the handlers package serves it.
package flashline

import (
	"context"
	"errors"
	"time"
)

// Sale states. StateSoldOut is never stored: it is an open sale with nothing
// available, derived when a sale is read.
const (
	StateScheduled = "scheduled"
	StateOpen      = "open"
	StateSoldOut   = "sold_out"
	StatePaused    = "paused"
	StateClosed    = "closed"
)

// Admission modes.
const (
	AdmissionDirect      = "direct"
	AdmissionWaitingRoom = "waiting_room"
)

// Fairness policies of a waiting room: how waiters are ordered.
const (
	// FairnessRandomizedAtOpen places everyone who arrived before the sale
	// opened by a draw fixed per customer and sale, and later arrivals after
	// them in arrival order.
	FairnessRandomizedAtOpen = "randomized_at_open"
	// FairnessArrivalOrder places everyone in order of arrival.
	FairnessArrivalOrder = "arrival_order"
)

// Reservation states.
const (
	ReservationPending   = "pending"
	ReservationConfirmed = "confirmed"
	ReservationExpired   = "expired"
	ReservationCancelled = "cancelled"
)

// Limits on what a sale may be created with.
const (
	MaxBuckets           = 64
	MaxSKULength         = 128
	MaxIdempotencyKeyLen = 255
	MaxCustomerIDLen     = 128
	// MaxChallengeBits is the hardest waiting-room challenge a sale may ask
	// (about 2^32 hashes: minutes in a browser).
	MaxChallengeBits = 32
	// MaxMinAccountAgeSeconds bounds the account-age rule (ten years).
	MaxMinAccountAgeSeconds = 10 * 365 * 24 * 3600
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
	ErrAccountTooNew   = errors.New("account too new for this sale")
	// ErrInstrumentLimitReached: the payment instrument holds the most units
	// the sale allows one instrument.
	ErrInstrumentLimitReached = errors.New("payment instrument limit reached")
	ErrNoWaitingRoom          = errors.New("sale has no waiting room")
)

// InvalidError is a request that is malformed or breaks a rule of the contract.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return e.Reason }

// Invalid returns an *InvalidError with the given reason.
func Invalid(reason string) error { return &InvalidError{Reason: reason} }

// NewSale is what an admin supplies to create a sale.
type NewSale struct {
	SKU                   string
	InitialStock          int
	PerCustomerLimit      int
	ReservationTTLSeconds int
	OpensAt               *time.Time
	Admission             string
	Buckets               int
	// Fairness is the waiting room's ordering policy (default
	// FairnessRandomizedAtOpen).
	Fairness string
	// ChallengeBits is the difficulty of the proof of work asked before
	// admission through the waiting room; 0 = none.
	ChallengeBits int
	// PerInstrumentLimit is the most units one payment instrument may hold
	// in the sale; 0 = no limit.
	PerInstrumentLimit int
	// MinAccountAgeSeconds refuses accounts younger than this (the
	// acct_created claim); 0 = no rule.
	MinAccountAgeSeconds int
}

// Validate checks a NewSale and fills in defaults.
func (n *NewSale) Validate() error {
	switch {
	case n.SKU == "" || len(n.SKU) > MaxSKULength:
		return Invalid("sku must be 1-128 characters")
	case !ValidText(n.SKU):
		return Invalid("sku must be text without control or format characters")
	case n.InitialStock < 1 || n.InitialStock > 100_000_000:
		return Invalid("initialStock must be between 1 and 100000000")
	}
	if n.PerCustomerLimit == 0 {
		n.PerCustomerLimit = 1
	}
	if n.ReservationTTLSeconds == 0 {
		n.ReservationTTLSeconds = 600
	}
	if n.Admission == "" {
		n.Admission = AdmissionDirect
	}
	if n.Buckets == 0 {
		n.Buckets = 1
	}
	if n.Fairness == "" {
		n.Fairness = FairnessRandomizedAtOpen
	}
	switch {
	case n.PerCustomerLimit < 1 || n.PerCustomerLimit > 1000:
		return Invalid("perCustomerLimit must be between 1 and 1000")
	case n.ReservationTTLSeconds < 1 || n.ReservationTTLSeconds > 7*24*3600:
		return Invalid("reservationTtlSeconds must be between 1 and 604800")
	case n.Admission != AdmissionDirect && n.Admission != AdmissionWaitingRoom:
		return Invalid(`admission must be "direct" or "waiting_room"`)
	case n.Buckets < 1 || n.Buckets > MaxBuckets:
		return Invalid("buckets must be between 1 and 64")
	case n.Buckets > n.InitialStock:
		return Invalid("buckets must not exceed initialStock")
	case n.Fairness != FairnessRandomizedAtOpen && n.Fairness != FairnessArrivalOrder:
		return Invalid(`fairness must be "randomized_at_open" or "arrival_order"`)
	case n.ChallengeBits < 0 || n.ChallengeBits > MaxChallengeBits:
		return Invalid("challengeBits must be between 0 (no challenge) and 32")
	case n.ChallengeBits > 0 && n.Admission != AdmissionWaitingRoom:
		return Invalid(`challengeBits needs "admission": "waiting_room" (the challenge is asked in the waiting room)`)
	case n.PerInstrumentLimit < 0 || n.PerInstrumentLimit > 1000:
		return Invalid("perInstrumentLimit must be between 1 and 1000, or null for no limit")
	case n.MinAccountAgeSeconds < 0 || n.MinAccountAgeSeconds > MaxMinAccountAgeSeconds:
		return Invalid("minAccountAgeSeconds must be between 0 and 315360000 (ten years)")
	}
	return nil
}

// Invariant is the last verdict of the invariant check on a sale.
type Invariant struct {
	OK        bool
	CheckedAt *time.Time
	Detail    string
}

// Sale is a sale with its live counts, in units.
type Sale struct {
	ID                    string
	SKU                   string
	State                 string
	InitialStock          int
	Available             int
	Pending               int
	Confirmed             int
	Expired               int
	Cancelled             int
	LedgerTotal           int
	PerCustomerLimit      int
	ReservationTTLSeconds int
	Admission             string
	Buckets               int
	Fairness              string
	ChallengeBits         int
	PerInstrumentLimit    int // 0: no limit
	MinAccountAgeSeconds  int
	OpensAt               *time.Time
	PauseReason           string
	Invariant             Invariant
	CreatedAt             time.Time
}

// Reservation is a hold on units of a sale.
type Reservation struct {
	ID          string
	SaleID      string
	CustomerID  string
	Quantity    int
	State       string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	ConfirmedAt *time.Time
	OrderID     string
}

// ReserveRequest is one customer's attempt to reserve units.
type ReserveRequest struct {
	SaleID         string
	CustomerID     string
	IdempotencyKey string
	Quantity       int
	// AdmissionToken is the X-Admission-Token header, required by sales
	// that admit through their waiting room.
	AdmissionToken string
	// AdmissionID is the single-use id of AdmissionToken once its signature,
	// expiry, sale and customer have been checked; "" when the token is
	// absent or not valid for this request.
	AdmissionID string
	// PaymentInstrument is the body's paymentInstrument fingerprint ("" when
	// absent); sales with a per-instrument limit count units against it.
	PaymentInstrument string
	// AccountCreated is when the customer's account was made (zero when the
	// token does not say), checked against the sale's minimum account age.
	AccountCreated time.Time
	// Fingerprint identifies the request body: the same key with a different
	// fingerprint is ErrIdempotencyKeyReused.
	Fingerprint []byte
	// Render turns the new reservation into the response body that is stored
	// under the idempotency key and replayed byte for byte.
	Render func(Reservation) ([]byte, error)
}

// ReserveResult is the outcome of a successful reserve: a new reservation, or
// the stored answer to an earlier request with the same key.
type ReserveResult struct {
	Status   int
	Body     []byte
	Replayed bool
}

// Actor is who is acting on a reservation: a customer, or the admin.
type Actor struct {
	CustomerID string
	Admin      bool
	// AccountCreated is when the customer's account was made, from the
	// token's acct_created claim; zero when the token did not say.
	AccountCreated time.Time
}

// CanAct reports whether the actor may act on a reservation owned by customerID.
func (a Actor) CanAct(customerID string) bool { return a.Admin || a.CustomerID == customerID }

// Store is the durable record of sales and reservations. Every method is safe
// for concurrent use by any number of processes sharing one database.
type Store interface {
	CreateSale(ctx context.Context, n NewSale) (Sale, error)
	Sale(ctx context.Context, saleID string) (Sale, error)
	SaleIDs(ctx context.Context) ([]string, error)
	SetSaleState(ctx context.Context, saleID, action string) (Sale, error)
	Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error)
	Reservation(ctx context.Context, reservationID string, by Actor) (Reservation, error)
	Confirm(ctx context.Context, reservationID string, by Actor) (Reservation, error)
	Cancel(ctx context.Context, reservationID string, by Actor) (Reservation, error)
}

// Sale actions accepted by Store.SetSaleState.
const (
	ActionOpen   = "open"
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionClose  = "close"
)

// AccountOldEnough reports whether an account created at created is at least
// minSeconds old at now. With a rule in force, an account whose creation time
// is unknown (zero: the token did not say) is refused: the rule fails closed.
func AccountOldEnough(created time.Time, minSeconds int, now time.Time) bool {
	if minSeconds <= 0 {
		return true
	}
	return !created.IsZero() && !now.Before(created.Add(time.Duration(minSeconds)*time.Second))
}
