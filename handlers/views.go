package handlers

import (
	"time"

	"github.com/flashline/flashline"
)

// The contract's JSON shapes. Field order is the order clients see.

// SaleView is the sale object of the HTTP contract.
type SaleView struct {
	SaleID                string        `json:"saleId"`
	SKU                   string        `json:"sku"`
	State                 string        `json:"state"`
	InitialStock          int           `json:"initialStock"`
	Available             int           `json:"available"`
	Pending               int           `json:"pending"`
	Confirmed             int           `json:"confirmed"`
	Expired               int           `json:"expired"`
	Cancelled             int           `json:"cancelled"`
	PerCustomerLimit      int           `json:"perCustomerLimit"`
	ReservationTTLSeconds int           `json:"reservationTtlSeconds"`
	Admission             string        `json:"admission"`
	Buckets               int           `json:"buckets"`
	Fairness              string        `json:"fairness"`
	ChallengeBits         int           `json:"challengeBits"`
	PerInstrumentLimit    *int          `json:"perInstrumentLimit"` // null: no limit
	MinAccountAgeSeconds  int           `json:"minAccountAgeSeconds"`
	OpensAt               *string       `json:"opensAt"`
	PauseReason           string        `json:"pauseReason,omitempty"`
	Invariant             InvariantView `json:"invariant"`
}

// InvariantView is the sale's invariant verdict.
type InvariantView struct {
	OK        bool    `json:"ok"`
	CheckedAt *string `json:"checkedAt"`
	Detail    string  `json:"detail,omitempty"`
}

// NewSaleView renders a sale.
func NewSaleView(s flashline.Sale) SaleView {
	var perInstrument *int
	if s.PerInstrumentLimit > 0 {
		l := s.PerInstrumentLimit
		perInstrument = &l
	}
	return SaleView{
		SaleID:                s.ID,
		SKU:                   s.SKU,
		State:                 s.State,
		InitialStock:          s.InitialStock,
		Available:             s.Available,
		Pending:               s.Pending,
		Confirmed:             s.Confirmed,
		Expired:               s.Expired,
		Cancelled:             s.Cancelled,
		PerCustomerLimit:      s.PerCustomerLimit,
		ReservationTTLSeconds: s.ReservationTTLSeconds,
		Admission:             s.Admission,
		Buckets:               s.Buckets,
		Fairness:              s.Fairness,
		ChallengeBits:         s.ChallengeBits,
		PerInstrumentLimit:    perInstrument,
		MinAccountAgeSeconds:  s.MinAccountAgeSeconds,
		OpensAt:               timeString(s.OpensAt),
		PauseReason:           s.PauseReason,
		Invariant: InvariantView{
			OK:        s.Invariant.OK,
			CheckedAt: timeString(s.Invariant.CheckedAt),
			Detail:    s.Invariant.Detail,
		},
	}
}

// ReservationView is the reservation object of the HTTP contract. The first
// five fields are exactly the 201 answer to a reservation.
type ReservationView struct {
	ReservationID string `json:"reservationId"`
	SaleID        string `json:"saleId"`
	Quantity      int    `json:"quantity"`
	State         string `json:"state"`
	ExpiresAt     string `json:"expiresAt"`
	OrderID       string `json:"orderId,omitempty"`
}

// NewReservationView renders a reservation.
func NewReservationView(r flashline.Reservation) ReservationView {
	return ReservationView{
		ReservationID: r.ID,
		SaleID:        r.SaleID,
		Quantity:      r.Quantity,
		State:         r.State,
		ExpiresAt:     r.ExpiresAt.UTC().Format(time.RFC3339),
		OrderID:       r.OrderID,
	}
}

// OrderView is the answer to a confirm.
type OrderView struct {
	OrderID       string `json:"orderId"`
	ReservationID string `json:"reservationId"`
}

func timeString(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}
