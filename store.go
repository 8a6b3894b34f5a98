package flashline

import "context"

// Store is the durable record of sales and reservations. Every method is safe
// for concurrent use by any number of processes sharing one database.
type Store interface {
	CreateSale(ctx context.Context, n NewSale) (Sale, error)
	Sale(ctx context.Context, saleID string) (Sale, error)
	SaleIDs(ctx context.Context) ([]string, error)
	SetSaleState(ctx context.Context, saleID string, action SaleAction) (Sale, error)
	Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error)
	Reservation(ctx context.Context, reservationID string, by Actor) (Reservation, error)
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
}
