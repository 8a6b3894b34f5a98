package handlers

import (
	"encoding/hex"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/waitroom"
)

// The contract's JSON shapes are package api's; these render the domain's
// values into them.

// NewSaleView renders a sale.
func NewSaleView(s flashline.Sale) api.Sale {
	var perInstrument *int
	if s.PerInstrumentLimit > 0 {
		l := s.PerInstrumentLimit
		perInstrument = &l
	}
	return api.Sale{
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
		Invariant: api.Invariant{
			OK:        s.Invariant.OK,
			CheckedAt: timeString(s.Invariant.CheckedAt),
			Detail:    s.Invariant.Detail,
		},
		Gate:     NewGateView(s),
		Lottery:  NewLotteryView(s.Lottery),
		Price:    newPriceView(s.Price),
		Variants: newVariantViews(s.Variants),
	}
}

func newVariantViews(vs []flashline.Variant) []api.Variant {
	var out []api.Variant
	for _, v := range vs {
		out = append(out, api.Variant{SKU: v.SKU, Title: v.Title, InitialStock: v.InitialStock,
			Available: v.Available, Pending: v.Pending, Confirmed: v.Confirmed})
	}
	return out
}

func newPriceView(p *flashline.Price) *api.Price {
	if p == nil {
		return nil
	}
	return &api.Price{Amount: p.Amount, Currency: p.Currency}
}

// NewGateView renders a sale's gate.
func NewGateView(s flashline.Sale) api.Gate {
	v := api.Gate{Kind: string(s.Gate)}
	if v.Kind == "" {
		v.Kind = string(flashline.GateNone)
	}
	if st := s.GateStatus; st != nil {
		v.Counter, v.Drift, v.OK = &st.Counter, &st.Drift, &st.OK
		for _, x := range st.Variants {
			v.Variants = append(v.Variants, api.GateVariant{SKU: x.SKU, Counter: x.Counter, Drift: x.Drift})
		}
	}
	return v
}

// NewReservationView renders a reservation.
func NewReservationView(r flashline.Reservation) api.Reservation {
	return api.Reservation{Receipt: flashline.NewReceipt(r), OrderID: r.OrderID}
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

func newChallengeView(c *waitroom.Challenge) *api.Challenge {
	if c == nil {
		return nil
	}
	return &api.Challenge{Nonce: c.Nonce, Bits: c.Bits}
}

func newPositionRange(low, high int64) *api.PositionRange {
	if low == 0 && high == 0 {
		return nil
	}
	return &api.PositionRange{P25: low, P75: high}
}

// NewTicketView renders a ticket.
func NewTicketView(t waitroom.TicketResult) api.Ticket {
	return api.Ticket{
		Token:                t.Token,
		Position:             t.Position,
		PositionRange:        newPositionRange(t.PositionLow, t.PositionHigh),
		EstimatedWaitSeconds: t.EstimatedWaitSeconds,
		PollAfterMs:          t.PollAfter.Milliseconds(),
		Policy:               string(t.Policy),
		Challenge:            newChallengeView(t.Challenge),
	}
}

// NewStatusView renders a status.
func NewStatusView(s waitroom.StatusResult) api.Status {
	v := api.Status{State: s.State, Message: s.Message}
	for _, x := range s.Variants {
		v.Variants = append(v.Variants, api.VariantAvailability{SKU: x.SKU, Title: x.Title, Availability: string(x.Availability)})
	}
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

// NewPolicyView is the JSON form of a policy.
func NewPolicyView(p waitroom.Policy) api.Policy {
	v := api.Policy{Policy: string(p.Policy), Description: p.Description, DrawCommitment: p.Draw.Commitment,
		Title: p.Title, ImageURL: optionalString(p.ImageURL), OpensAt: timeString(p.OpensAt)}
	if p.Draw.Seed != nil {
		v.DrawSeed = hex.EncodeToString(p.Draw.Seed)
	}
	return v
}

// NewPaymentResultView renders a payment event's outcome.
func NewPaymentResultView(r flashline.PaymentResult) api.PaymentResult {
	return api.PaymentResult{
		EventID: r.EventID, Type: string(r.Type), Outcome: string(r.Outcome), ReservationID: r.ReservationID,
		State: string(r.State), OrderID: r.OrderID, Replayed: r.Replayed,
	}
}

// NewLatePaymentView renders a late payment.
func NewLatePaymentView(l flashline.LatePayment) api.LatePayment {
	return api.LatePayment{
		EventID: l.EventID, ReservationID: l.ReservationID, SaleID: l.SaleID, PaymentReference: l.PaymentReference,
		Amount: l.Amount, Currency: l.Currency, Reason: string(l.Reason),
		ReceivedAt: l.ReceivedAt.UTC().Format(time.RFC3339), RefundedAt: timeString(l.RefundedAt), RefundEventID: l.RefundEventID,
	}
}
