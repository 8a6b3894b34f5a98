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
}
