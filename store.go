package flashline

import "context"

// Store is the durable record of sales and reservations. Every method is safe
// for concurrent use by any number of processes sharing one database.
//
// The postgres package implements it; the sale cache (package salecache) and
// the Redis gate (package gate) wrap it, each overriding the methods it must
// see, and package stack puts the three together into the one Store the HTTP
// layer uses. Which methods change stock, and so which a wrapper must see, is
// StockEffectOf's to say.
type Store interface {
	CreateSale(ctx context.Context, n NewSale) (Sale, error)
	Sale(ctx context.Context, saleID string) (Sale, error)
	// SaleIDs lists a page of sales, newest first (SaleQuery): what the
	// admin API's GET /admin/sales and the console's list show.
	SaleIDs(ctx context.Context, q SaleQuery) ([]string, error)
	SetSaleState(ctx context.Context, saleID string, action SaleAction) (Sale, error)
	Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error)
	Reservation(ctx context.Context, reservationID string, by Actor) (Reservation, error)
	// CustomerReservation is by's own active (pending or confirmed)
	// reservation in saleID, the one that holds the per-customer limit:
	// ErrNotFound when there is none.
	CustomerReservation(ctx context.Context, saleID string, by Actor) (Reservation, error)
	Confirm(ctx context.Context, reservationID string, by Actor) (Reservation, error)
	Cancel(ctx context.Context, reservationID string, by Actor) (Reservation, error)

	// ApplyPaymentEvent applies an authenticated payment event once per
	// event id (a repeated id is a replay: Replayed, no effect).
	ApplyPaymentEvent(ctx context.Context, e PaymentEvent) (PaymentResult, error)
	// LatePayments lists late payments, newest first: those still to
	// refund, or all with includeRefunded; at most limit.
	LatePayments(ctx context.Context, includeRefunded bool, limit int) ([]LatePayment, error)
	// ExtendSale extends every pending hold of a sale by seconds (each hold
	// at most MaxExtensionTotal in all), audited under operator.
	ExtendSale(ctx context.Context, saleID string, seconds int, operator string) (ExtendResult, error)
	// ExtendReservation extends one pending hold.
	ExtendReservation(ctx context.Context, reservationID string, seconds int, operator string) (Reservation, error)
	// Void voids a confirmed order and returns its units exactly once;
	// voiding it again returns it as it is.
	Void(ctx context.Context, reservationID, reason, operator string) (Reservation, error)

	// The lottery's registrations (lottery.go).
	LotteryStore
}

// StockEffect is how a Store method may change a sale's stock: what a
// wrapper of the Store must see to stay right. The sale cache must see every
// reservation (to learn at once that the database said sold out) and every
// return of units (memory that saw the sale sold out is wrong from the
// commit on); the gate must see the stock made, taken and returned (its
// counter is set at creation, hands out units, and takes them back).
type StockEffect uint8

// Stock effects; a method may have several.
const (
	// StockCreated: a sale and its stock are made.
	StockCreated StockEffect = 1 << iota
	// StockTaken: units leave the available stock for a hold.
	StockTaken
	// StockReturned: units come back to the available stock (a cancel, a
	// void, a failed payment, a refund), exactly once.
	StockReturned
)

// stockEffects is every Store method by name, with its effect on stock (0:
// none). A test fails when a method of Store is missing here, so that a new
// method is classified when it is added.
var stockEffects = map[string]StockEffect{
	"CreateSale":          StockCreated,
	"Sale":                0,
	"SaleIDs":             0,
	"SetSaleState":        0, // the state, not the stock (the gate sees resume all the same)
	"Reserve":             StockTaken,
	"Reservation":         0,
	"CustomerReservation": 0,
	"Confirm":             0, // pending to confirmed: the units stay taken
	"Cancel":              StockReturned,
	"ApplyPaymentEvent":   StockReturned, // payment.failed cancels, refund.succeeded voids
	"LatePayments":        0,
	"ExtendSale":          0,
	"ExtendReservation":   0,
	"Void":                StockReturned,
	"Lottery":             0,
	"Register":            0,
	"Registration":        0,
	"LotteryEntries":      0,
	"Crowd":               0,
}

// StockEffectOf is how the Store method named method changes stock; known
// is false for a name that is not a method of Store.
func StockEffectOf(method string) (effect StockEffect, known bool) {
	effect, known = stockEffects[method]
	return effect, known
}
