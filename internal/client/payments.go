package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/flashline/flashline/webhook"
)

// The payment side and the operators' calls of the contract.

// PaymentEvent is the body of POST /payments/events.
type PaymentEvent struct {
	ID   string      `json:"id"`
	Type string      `json:"type"` // payment.succeeded, payment.failed, refund.succeeded
	Data PaymentData `json:"data"`
}

// PaymentData is an event's data. Zero fields are left out.
type PaymentData struct {
	ReservationID    string `json:"reservationId"`
	PaymentReference string `json:"paymentReference,omitempty"`
	Amount           *int64 `json:"amount,omitempty"`
	Currency         string `json:"currency,omitempty"`
	Reason           string `json:"reason,omitempty"`
	// PaymentInstrument is the instrument that paid, as the provider
	// reported it (payment.succeeded).
	PaymentInstrument string `json:"paymentInstrument,omitempty"`
}

// SendPaymentEvent is POST /payments/events with ev as its body, signed at
// time at with each of secrets (one v1 each), as the payment side sends it.
func (c *Client) SendPaymentEvent(ctx context.Context, at time.Time, ev PaymentEvent, secrets ...string) (Result[PaymentResult], error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return Result[PaymentResult]{}, err
	}
	return c.SendPaymentEventBody(ctx, webhook.Sign(at, body, secrets...), body)
}

// SendPaymentEventBody is POST /payments/events with the body and signature
// header as given (a test's tampered or stale ones).
func (c *Client) SendPaymentEventBody(ctx context.Context, signature string, body []byte) (Result[PaymentResult], error) {
	var h []string
	if signature != "" {
		h = []string{webhook.Header, signature}
	}
	return call[PaymentResult](ctx, c, Request{Method: http.MethodPost, Path: "/payments/events", Body: string(body), Header: h})
}

// LatePayments is GET /admin/payments/late: the late payments still to
// refund, or with all every one.
func (c *Client) LatePayments(ctx context.Context, adminToken string, all bool) (Result[LatePaymentList], error) {
	path := "/admin/payments/late"
	if all {
		path += "?all=true"
	}
	return call[LatePaymentList](ctx, c, Request{Method: http.MethodGet, Path: path, Token: adminToken})
}

// ExtendSale is POST /admin/sales/{id}/extend: every pending hold of the
// sale, by seconds.
func (c *Client) ExtendSale(ctx context.Context, adminToken, saleID string, seconds int, operator string) (Result[Extended], error) {
	body, err := json.Marshal(struct {
		Seconds  int    `json:"seconds"`
		Operator string `json:"operator,omitempty"`
	}{seconds, operator})
	if err != nil {
		return Result[Extended]{}, err
	}
	return call[Extended](ctx, c, Request{Method: http.MethodPost, Path: adminSalePath(saleID) + "/extend", Token: adminToken, Body: string(body)})
}

// ExtendReservation is POST /admin/reservations/{id}/extend.
func (c *Client) ExtendReservation(ctx context.Context, adminToken, reservationID string, seconds int, operator string) (Result[Reservation], error) {
	body, err := json.Marshal(struct {
		Seconds  int    `json:"seconds"`
		Operator string `json:"operator,omitempty"`
	}{seconds, operator})
	if err != nil {
		return Result[Reservation]{}, err
	}
	return call[Reservation](ctx, c, Request{Method: http.MethodPost, Path: "/admin" + reservationPath(reservationID) + "/extend", Token: adminToken, Body: string(body)})
}

// Void is POST /admin/reservations/{id}/void: the order voided, its units
// back once.
func (c *Client) Void(ctx context.Context, adminToken, reservationID, reason, operator string) (Result[Reservation], error) {
	body, err := json.Marshal(struct {
		Reason   string `json:"reason"`
		Operator string `json:"operator,omitempty"`
	}{reason, operator})
	if err != nil {
		return Result[Reservation]{}, err
	}
	return call[Reservation](ctx, c, Request{Method: http.MethodPost, Path: "/admin" + reservationPath(reservationID) + "/void", Token: adminToken, Body: string(body)})
}

// VoidMany is POST /admin/reservations/void: each of ids voided on its own.
func (c *Client) VoidMany(ctx context.Context, adminToken string, ids []string, reason, operator string) (Result[BulkVoided], error) {
	body, err := json.Marshal(struct {
		ReservationIDs []string `json:"reservationIds"`
		Reason         string   `json:"reason"`
		Operator       string   `json:"operator,omitempty"`
	}{ids, reason, operator})
	if err != nil {
		return Result[BulkVoided]{}, err
	}
	return call[BulkVoided](ctx, c, Request{Method: http.MethodPost, Path: "/admin/reservations/void", Token: adminToken, Body: string(body)})
}
