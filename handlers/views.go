package handlers

import (
	"encoding/hex"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom"
)

// The contract's JSON shapes. Field order is the order clients see.

// SaleView is the sale object of the HTTP contract.
type SaleView struct {
	SaleID                string        `json:"saleId"`
	SKU                   string        `json:"sku"`
	Title                 string        `json:"title"`
	ImageURL              *string       `json:"imageUrl"` // null: none
	State                 string        `json:"state"`
	InitialStock          int           `json:"initialStock"`
	Available             int           `json:"available"`
	Pending               int           `json:"pending"`
	Confirmed             int           `json:"confirmed"`
	Expired               int           `json:"expired"`
	Cancelled             int           `json:"cancelled"`
	Voided                int           `json:"voided"`
	PerCustomerLimit      int           `json:"perCustomerLimit"`
	ReservationTTLSeconds int           `json:"reservationTtlSeconds"`
	Admission             string        `json:"admission"`
	Buckets               int           `json:"buckets"`
	Fairness              string        `json:"fairness"`
	ChallengeBits         int           `json:"challengeBits"`
	PerInstrumentLimit    *int          `json:"perInstrumentLimit"` // null: no limit
	MinAccountAgeSeconds  int           `json:"minAccountAgeSeconds"`
	Confirmation          string        `json:"confirmation"`
	OpensAt               *string       `json:"opensAt"`
	PauseReason           string        `json:"pauseReason,omitempty"`
	Invariant             InvariantView `json:"invariant"`
	Gate                  GateView      `json:"gate"`
	Lottery               *LotteryView  `json:"lottery,omitempty"`
}

// GateView is what counts the sale's units in front of the database, and
// for a Redis gate how its counter stands: counter as Redis holds it (-1:
// missing or unreachable), drift = available in the database − counter −
// units owed back − units in flight, ok when they agree and the counter is
// not being rebuilt.
type GateView struct {
	Kind    string `json:"kind"` // none or redis
	Counter *int64 `json:"counter,omitempty"`
	Drift   *int64 `json:"drift,omitempty"`
	OK      *bool  `json:"ok,omitempty"`
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
		Title:                 s.Title,
		ImageURL:              optionalString(s.ImageURL),
		State:                 string(s.State),
		InitialStock:          s.InitialStock,
		Available:             s.Available,
		Pending:               s.Pending,
		Confirmed:             s.Confirmed,
		Expired:               s.Expired,
		Cancelled:             s.Cancelled,
		Voided:                s.Voided,
		PerCustomerLimit:      s.PerCustomerLimit,
		ReservationTTLSeconds: s.ReservationTTLSeconds,
		Admission:             string(s.Admission),
		Buckets:               s.Buckets,
		Fairness:              string(s.Fairness),
		ChallengeBits:         s.ChallengeBits,
		PerInstrumentLimit:    perInstrument,
		MinAccountAgeSeconds:  s.MinAccountAgeSeconds,
		Confirmation:          string(s.Confirmation),
		OpensAt:               timeString(s.OpensAt),
		PauseReason:           s.PauseReason,
		Invariant: InvariantView{
			OK:        s.Invariant.OK,
			CheckedAt: timeString(s.Invariant.CheckedAt),
			Detail:    s.Invariant.Detail,
		},
		Gate:    NewGateView(s),
		Lottery: NewLotteryView(s.Lottery),
	}
}

// NewGateView renders a sale's gate.
func NewGateView(s flashline.Sale) GateView {
	v := GateView{Kind: string(s.Gate)}
	if v.Kind == "" {
		v.Kind = string(flashline.GateNone)
	}
	if st := s.GateStatus; st != nil {
		v.Counter, v.Drift, v.OK = &st.Counter, &st.Drift, &st.OK
	}
	return v
}

// ReservationView is the reservation object of the HTTP contract: the
// reservation's receipt (the 201 answer to a reservation, stored and
// replayed byte for byte: flashline.Receipt) and, once confirmed, its order.
type ReservationView struct {
	flashline.Receipt
	OrderID string `json:"orderId,omitempty"`
}

// NewReservationView renders a reservation.
func NewReservationView(r flashline.Reservation) ReservationView {
	return ReservationView{Receipt: flashline.NewReceipt(r), OrderID: r.OrderID}
}

// OrderView is the answer to a confirm.
type OrderView struct {
	OrderID       string `json:"orderId"`
	ReservationID string `json:"reservationId"`
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeString(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// ChallengeView is the waiting room's proof of work: find a decimal solution
// such that SHA-256(nonce + ":" + solution) has bits leading zero bits.
type ChallengeView struct {
	Nonce string `json:"nonce"`
	Bits  int    `json:"bits"`
}

func newChallengeView(c *waitroom.Challenge) *ChallengeView {
	if c == nil {
		return nil
	}
	return &ChallengeView{Nonce: c.Nonce, Bits: c.Bits}
}

// PositionRangeView is the 25th and 75th percentiles of a place placed by a
// random draw: position is then an estimate, and the page shows the range.
type PositionRangeView struct {
	P25 int64 `json:"p25"`
	P75 int64 `json:"p75"`
}

func newPositionRange(low, high int64) *PositionRangeView {
	if low == 0 && high == 0 {
		return nil
	}
	return &PositionRangeView{P25: low, P75: high}
}

// TicketView is the answer to GET /sales/{saleId}/ticket. challenge is null
// when the sale asks none; positionRange is there only when the place is an
// estimate (placed by the draw).
type TicketView struct {
	Token                string             `json:"token"`
	Position             int64              `json:"position"`
	PositionRange        *PositionRangeView `json:"positionRange,omitempty"`
	EstimatedWaitSeconds int64              `json:"estimatedWaitSeconds"`
	PollAfterMs          int64              `json:"pollAfterMs"`
	Policy               string             `json:"policy"`
	Challenge            *ChallengeView     `json:"challenge"`
}

// NewTicketView renders a ticket.
func NewTicketView(t waitroom.TicketResult) TicketView {
	return TicketView{
		Token:                t.Token,
		Position:             t.Position,
		PositionRange:        newPositionRange(t.PositionLow, t.PositionHigh),
		EstimatedWaitSeconds: t.EstimatedWaitSeconds,
		PollAfterMs:          t.PollAfter.Milliseconds(),
		Policy:               string(t.Policy),
		Challenge:            newChallengeView(t.Challenge),
	}
}

// StatusView is the answer to GET /sales/{saleId}/status: exactly the fields
// of its state.
type StatusView struct {
	State                string             `json:"state"`
	Position             *int64             `json:"position,omitempty"`
	PositionRange        *PositionRangeView `json:"positionRange,omitempty"`
	EstimatedWaitSeconds *int64             `json:"estimatedWaitSeconds,omitempty"`
	PollAfterMs          *int64             `json:"pollAfterMs,omitempty"`
	Paused               bool               `json:"paused,omitempty"`
	Held                 bool               `json:"held,omitempty"`
	Stale                bool               `json:"stale,omitempty"`
	Message              string             `json:"message,omitempty"`
	Challenge            *ChallengeView     `json:"challenge,omitempty"`
	AdmissionToken       string             `json:"admissionToken,omitempty"`
	ExpiresIn            *int64             `json:"expiresIn,omitempty"`
	QueueIsFull          *bool              `json:"queueIsFull,omitempty"`
}

// NewStatusView renders a status.
func NewStatusView(s waitroom.StatusResult) StatusView {
	v := StatusView{State: s.State, Message: s.Message}
	switch s.State {
	case waitroom.StatusWaiting:
		poll := s.PollAfter.Milliseconds()
		v.Position, v.EstimatedWaitSeconds, v.PollAfterMs = &s.Position, &s.EstimatedWaitSeconds, &poll
		v.Paused, v.Held, v.Stale = s.Paused, s.Held, s.Stale
		v.PositionRange = newPositionRange(s.PositionLow, s.PositionHigh)
	case waitroom.StatusChallengeRequired:
		v.Challenge = newChallengeView(s.Challenge)
	case waitroom.StatusAdmitted:
		secs := int64(s.ExpiresIn / time.Second)
		v.AdmissionToken, v.ExpiresIn = s.AdmissionToken, &secs
	case waitroom.StatusSoldOut:
		full := s.QueueIsFull
		v.QueueIsFull = &full
		if !full {
			poll := s.PollAfter.Milliseconds()
			v.PollAfterMs = &poll
		}
	}
	return v
}

// PolicyView is a sale's published fairness policy.
type PolicyView struct {
	Policy      string `json:"policy"`
	Description string `json:"description"`
	// DrawCommitment is the hex SHA-256 of the sale's draw seed, published
	// before the open; DrawSeed is the seed in hex, from the open on (absent
	// before). See flashline.DiscloseDraw (draw.go).
	DrawCommitment string `json:"drawCommitment"`
	DrawSeed       string `json:"drawSeed,omitempty"`
	// Title, ImageURL and OpensAt are what the waiting-room page shows of
	// the sale: its product, and when it opens (null: when the store opens
	// it).
	Title    string  `json:"title"`
	ImageURL *string `json:"imageUrl"`
	OpensAt  *string `json:"opensAt"`
}

// NewPolicyView is the JSON form of a policy.
func NewPolicyView(p waitroom.Policy) PolicyView {
	v := PolicyView{Policy: string(p.Policy), Description: p.Description, DrawCommitment: p.Draw.Commitment,
		Title: p.Title, ImageURL: optionalString(p.ImageURL), OpensAt: timeString(p.OpensAt)}
	if p.Draw.Seed != nil {
		v.DrawSeed = hex.EncodeToString(p.Draw.Seed)
	}
	return v
}

// PaymentResultView is the answer to a payment event.
type PaymentResultView struct {
	EventID       string `json:"eventId"`
	Type          string `json:"type"`
	Outcome       string `json:"outcome"`
	ReservationID string `json:"reservationId"`
	State         string `json:"state,omitempty"`
	OrderID       string `json:"orderId,omitempty"`
	Replayed      bool   `json:"replayed"`
}

// NewPaymentResultView renders a payment event's outcome.
func NewPaymentResultView(r flashline.PaymentResult) PaymentResultView {
	return PaymentResultView{
		EventID: r.EventID, Type: string(r.Type), Outcome: string(r.Outcome), ReservationID: r.ReservationID,
		State: string(r.State), OrderID: r.OrderID, Replayed: r.Replayed,
	}
}

// LatePaymentView is a payment to refund.
type LatePaymentView struct {
	EventID          string  `json:"eventId"`
	ReservationID    string  `json:"reservationId"`
	SaleID           string  `json:"saleId"`
	PaymentReference string  `json:"paymentReference"`
	Amount           *int64  `json:"amount"`
	Currency         string  `json:"currency,omitempty"`
	Reason           string  `json:"reason"`
	ReceivedAt       string  `json:"receivedAt"`
	RefundedAt       *string `json:"refundedAt"`
	RefundEventID    string  `json:"refundEventId,omitempty"`
}

// NewLatePaymentView renders a late payment.
func NewLatePaymentView(l flashline.LatePayment) LatePaymentView {
	return LatePaymentView{
		EventID: l.EventID, ReservationID: l.ReservationID, SaleID: l.SaleID, PaymentReference: l.PaymentReference,
		Amount: l.Amount, Currency: l.Currency, Reason: string(l.Reason),
		ReceivedAt: l.ReceivedAt.UTC().Format(time.RFC3339), RefundedAt: timeString(l.RefundedAt), RefundEventID: l.RefundEventID,
	}
}

// LatePaymentsView is GET /admin/payments/late.
type LatePaymentsView struct {
	LatePayments []LatePaymentView `json:"latePayments"`
}

// ExtendView is what extending a sale's holds did.
type ExtendView struct {
	SaleID   string `json:"saleId"`
	Seconds  int    `json:"seconds"`
	Extended int    `json:"extended"`
	AtCap    int    `json:"atCap"`
}

// VoidResultView is one reservation's line of a bulk void: its state now,
// or the error that kept it from being voided.
type VoidResultView struct {
	ReservationID string       `json:"reservationId"`
	State         string       `json:"state,omitempty"`
	OrderID       string       `json:"orderId,omitempty"`
	Error         *errorDetail `json:"error,omitempty"`
}

// BulkVoidView is the answer to a bulk void.
type BulkVoidView struct {
	Voided  int              `json:"voided"`
	Results []VoidResultView `json:"results"`
}
