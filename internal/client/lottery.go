package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Lottery is a lottery sale's rules and its registrations by state, on the
// admin's view of the sale.
type Lottery struct {
	RegistrationOpensAt   time.Time     `json:"registrationOpensAt"`
	RegistrationClosesAt  time.Time     `json:"registrationClosesAt"`
	DrawAt                time.Time     `json:"drawAt"`
	PurchaseWindowSeconds int           `json:"purchaseWindowSeconds"`
	Waitlist              bool          `json:"waitlist"`
	DrawnAt               *time.Time    `json:"drawnAt"`
	Registrations         LotteryCounts `json:"registrations"`
}

// LotteryCounts counts a lottery's registrations by state.
type LotteryCounts struct {
	Total      int `json:"total"`
	Registered int `json:"registered"`
	Won        int `json:"won"`
	Lost       int `json:"lost"`
	Waitlisted int `json:"waitlisted"`
	Expired    int `json:"expired"`
}

// Registration is a customer's registration in a lottery.
type Registration struct {
	RegistrationID string `json:"registrationId"`
	// State: unregistered, registered, won, lost, waitlisted, expired.
	State                string     `json:"state"`
	DrawRank             int        `json:"drawRank"`
	AdmissionToken       string     `json:"admissionToken"` // a winner's, for one reservation
	PurchaseWindowEndsAt *time.Time `json:"purchaseWindowEndsAt"`
	RegistrationOpen     *bool      `json:"registrationOpen"` // unregistered only
	Challenge            *Challenge `json:"challenge"`        // unregistered only
}

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

// Queue is the answer to the waiting room's queue controls.
type Queue struct {
	SaleID  string  `json:"saleId"`
	Held    *bool   `json:"held"`
	Message *string `json:"message"`
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
