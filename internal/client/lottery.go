package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// Register is POST /sales/{id}/registrations (idempotent per customer and
// sale); solution answers the sale's proof of work, when it asks one.
func (c *Client) Register(ctx context.Context, token, saleID, instrument, solution string) (Result[Registration], error) {
	body, err := json.Marshal(struct {
		PaymentInstrument string `json:"paymentInstrument"`
		Solution          string `json:"solution,omitempty"`
	}{instrument, solution})
	if err != nil {
		return Result[Registration]{}, err
	}
	return call[Registration](ctx, c, Request{Method: http.MethodPost, Path: salePath(saleID) + "/registrations", Token: token, Body: string(body)})
}

// Registration is GET /sales/{id}/registration: how the customer's
// registration stands.
func (c *Client) Registration(ctx context.Context, token, saleID string) (Result[Registration], error) {
	return call[Registration](ctx, c, Request{Method: http.MethodGet, Path: salePath(saleID) + "/registration", Token: token})
}

// HoldQueue is POST /admin/sales/{id}/queue/hold: nobody is admitted until
// ReleaseQueue (audited, with operator and reason).
func (c *Client) HoldQueue(ctx context.Context, adminToken, saleID, operator, reason string) (Result[Queue], error) {
	return c.queue(ctx, adminToken, saleID, "hold", operator, reason, nil)
}

// ReleaseQueue is POST /admin/sales/{id}/queue/release.
func (c *Client) ReleaseQueue(ctx context.Context, adminToken, saleID, operator, reason string) (Result[Queue], error) {
	return c.queue(ctx, adminToken, saleID, "release", operator, reason, nil)
}

// QueueMessage is POST /admin/sales/{id}/queue/message: message is shown to
// everyone waiting ("" clears it).
func (c *Client) QueueMessage(ctx context.Context, adminToken, saleID, operator, message string) (Result[Queue], error) {
	return c.queue(ctx, adminToken, saleID, "message", operator, "", &message)
}

func (c *Client) queue(ctx context.Context, adminToken, saleID, action, operator, reason string, message *string) (Result[Queue], error) {
	body, err := json.Marshal(struct {
		Operator string  `json:"operator,omitempty"`
		Reason   string  `json:"reason,omitempty"`
		Message  *string `json:"message,omitempty"`
	}{operator, reason, message})
	if err != nil {
		return Result[Queue]{}, err
	}
	return call[Queue](ctx, c, Request{Method: http.MethodPost, Path: adminSalePath(saleID) + "/queue/" + action, Token: adminToken, Body: string(body)})
}
