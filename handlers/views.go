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

// viewRoom holds what a ticket's or a status's view points to (its numbers,
// its range, its challenge). NewTicketView and NewStatusView keep it on the
// heap, with the view; the doors' appendTicket and appendStatus keep it on
// their stack, since the view is written at once and let go: a status poll
// answered from memory made three allocations for its view, a new ticket
// one.
type viewRoom struct {
	position, wait, poll, expiresIn int64
	full                            bool
	rng                             api.PositionRange
	challenge                       api.Challenge
}

func (n *viewRoom) challengeView(c *waitroom.Challenge) *api.Challenge {
	if c == nil {
		return nil
	}
	n.challenge = api.Challenge{Nonce: c.Nonce, Bits: c.Bits}
	return &n.challenge
}

func (n *viewRoom) positionRange(low, high int64) *api.PositionRange {
	if low == 0 && high == 0 {
		return nil
	}
	n.rng = api.PositionRange{P25: low, P75: high}
	return &n.rng
}

// NewTicketView renders a ticket.
func NewTicketView(t waitroom.TicketResult) api.Ticket {
	return new(viewRoom).ticket(&t)
}

// appendTicket appends t's view (NewTicketView's) as JSON to b.
func appendTicket(b []byte, t *waitroom.TicketResult) []byte {
	var n viewRoom
	return n.ticket(t).AppendJSON(b)
}

func (n *viewRoom) ticket(t *waitroom.TicketResult) api.Ticket {
	return api.Ticket{
		Token:                t.Token,
		Position:             t.Position,
		PositionRange:        n.positionRange(t.PositionLow, t.PositionHigh),
		EstimatedWaitSeconds: t.EstimatedWaitSeconds,
		PollAfterMs:          t.PollAfter.Milliseconds(),
		Policy:               string(t.Policy),
		Challenge:            n.challengeView(t.Challenge),
	}
}

// NewStatusView renders a status.
func NewStatusView(s waitroom.StatusResult) api.Status {
	return new(viewRoom).status(&s)
}

// appendStatus appends s's view (NewStatusView's) as JSON to b.
func appendStatus(b []byte, s *waitroom.StatusResult) []byte {
	var n viewRoom
	return n.status(s).AppendJSON(b)
}

func (n *viewRoom) status(s *waitroom.StatusResult) api.Status {
	v := api.Status{State: s.State, Message: s.Message}
	for _, x := range s.Variants {
		v.Variants = append(v.Variants, api.VariantAvailability{SKU: x.SKU, Title: x.Title, Availability: string(x.Availability)})
	}
	switch s.State {
	case waitroom.StatusWaiting:
		n.position, n.wait, n.poll = s.Position, s.EstimatedWaitSeconds, s.PollAfter.Milliseconds()
		v.Position, v.EstimatedWaitSeconds, v.PollAfterMs = &n.position, &n.wait, &n.poll
		v.Paused, v.Held, v.Stale = s.Paused, s.Held, s.Stale
		v.PositionRange = n.positionRange(s.PositionLow, s.PositionHigh)
	case waitroom.StatusChallengeRequired:
		v.Challenge = n.challengeView(s.Challenge)
	case waitroom.StatusAdmitted:
		n.expiresIn = int64(s.ExpiresIn / time.Second)
		v.AdmissionToken, v.ExpiresIn = s.AdmissionToken, &n.expiresIn
	case waitroom.StatusSoldOut:
		n.full = s.QueueIsFull
		v.QueueIsFull = &n.full
		if !n.full {
			n.poll = s.PollAfter.Milliseconds()
			v.PollAfterMs = &n.poll
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
