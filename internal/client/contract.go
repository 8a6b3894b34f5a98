package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The contract's JSON shapes, decoded independently of the handlers
// package's own types.

// Sale is the sale object.
type Sale struct {
	SaleID                string     `json:"saleId"`
	SKU                   string     `json:"sku"`
	Title                 string     `json:"title"`
	ImageURL              *string    `json:"imageUrl"` // nil: none
	State                 string     `json:"state"`    // scheduled, open, sold_out, paused, closed
	InitialStock          int        `json:"initialStock"`
	Available             int        `json:"available"`
	Pending               int        `json:"pending"`
	Confirmed             int        `json:"confirmed"`
	Expired               int        `json:"expired"`
	Cancelled             int        `json:"cancelled"`
	Voided                int        `json:"voided"`
	PerCustomerLimit      int        `json:"perCustomerLimit"`
	ReservationTTLSeconds int        `json:"reservationTtlSeconds"`
	Admission             string     `json:"admission"` // direct, waiting_room
	Buckets               int        `json:"buckets"`
	Fairness              string     `json:"fairness"`
	ChallengeBits         int        `json:"challengeBits"`
	PerInstrumentLimit    *int       `json:"perInstrumentLimit"` // nil: no limit
	MinAccountAgeSeconds  int        `json:"minAccountAgeSeconds"`
	Confirmation          string     `json:"confirmation"` // payment, customer
	OpensAt               *time.Time `json:"opensAt"`
	PauseReason           string     `json:"pauseReason"`
	Invariant             Invariant  `json:"invariant"`
	Gate                  Gate       `json:"gate"`
	Lottery               *Lottery   `json:"lottery"` // a lottery sale's rules and counts
}

// Gate is what counts the sale's units in front of the database; for a
// Redis gate, how its counter stands (nil: unknown).
type Gate struct {
	Kind    string `json:"kind"` // none, redis
	Counter *int64 `json:"counter"`
	Drift   *int64 `json:"drift"`
	OK      *bool  `json:"ok"`
}

// Invariant is a sale's last invariant verdict.
type Invariant struct {
	OK        bool       `json:"ok"`
	CheckedAt *time.Time `json:"checkedAt"`
	Detail    string     `json:"detail"`
}

// NewSale is the body of POST /admin/sales. Zero fields are left out, so the
// service's defaults apply (initialStock is always sent).
type NewSale struct {
	SKU                   string     `json:"sku"`
	Title                 string     `json:"title,omitempty"`
	ImageURL              string     `json:"imageUrl,omitempty"`
	InitialStock          int        `json:"initialStock"`
	PerCustomerLimit      int        `json:"perCustomerLimit,omitempty"`
	ReservationTTLSeconds int        `json:"reservationTtlSeconds,omitempty"`
	OpensAt               *time.Time `json:"opensAt,omitempty"`
	Admission             string     `json:"admission,omitempty"`
	Buckets               int        `json:"buckets,omitempty"`
	Fairness              string     `json:"fairness,omitempty"`
	ChallengeBits         int        `json:"challengeBits,omitempty"`
	PerInstrumentLimit    *int       `json:"perInstrumentLimit,omitempty"`
	MinAccountAgeSeconds  int        `json:"minAccountAgeSeconds,omitempty"`
	Confirmation          string     `json:"confirmation,omitempty"`
	Gate                  string     `json:"gate,omitempty"` // none, redis
	// A lottery sale's (Admission "lottery").
	RegistrationOpensAt   *time.Time `json:"registrationOpensAt,omitempty"`
	RegistrationClosesAt  *time.Time `json:"registrationClosesAt,omitempty"`
	DrawAt                *time.Time `json:"drawAt,omitempty"`
	PurchaseWindowSeconds int        `json:"purchaseWindowSeconds,omitempty"`
	Waitlist              bool       `json:"waitlist,omitempty"`
}

// Reservation is the reservation object (a 201 to a reservation has the
// first five fields only).
type Reservation struct {
	ReservationID string    `json:"reservationId"`
	SaleID        string    `json:"saleId"`
	Quantity      int       `json:"quantity"`
	State         string    `json:"state"` // pending, confirmed, expired, cancelled, voided
	ExpiresAt     time.Time `json:"expiresAt"`
	OrderID       string    `json:"orderId"`
}

// Order is the answer to a confirm.
type Order struct {
	OrderID       string `json:"orderId"`
	ReservationID string `json:"reservationId"`
}

// Challenge is the waiting room's proof of work: a decimal solution such
// that SHA-256 of "nonce:solution" has Bits leading zero bits.
type Challenge struct {
	Nonce string `json:"nonce"`
	Bits  int    `json:"bits"`
}

// Ticket is a place in a waiting room. Challenge is nil when the sale asks
// none.
type Ticket struct {
	Token                string         `json:"token"`
	Position             int64          `json:"position"`
	PositionRange        *PositionRange `json:"positionRange"`
	EstimatedWaitSeconds int64          `json:"estimatedWaitSeconds"`
	PollAfterMs          int64          `json:"pollAfterMs"`
	Policy               string         `json:"policy"`
	Challenge            *Challenge     `json:"challenge"`
}

// PositionRange is the likely range of a place decided by the draw.
type PositionRange struct {
	P25 int64 `json:"p25"`
	P75 int64 `json:"p75"`
}

// Status is where a ticket stands. Only the fields of its State are sent:
// waiting (Position, EstimatedWaitSeconds, PollAfterMs, Paused),
// challenge_required (Challenge), admitted (AdmissionToken, ExpiresIn),
// sold_out.
type Status struct {
	State                string         `json:"state"`
	Position             int64          `json:"position"`
	PositionRange        *PositionRange `json:"positionRange"`
	EstimatedWaitSeconds int64          `json:"estimatedWaitSeconds"`
	PollAfterMs          int64          `json:"pollAfterMs"`
	Paused               bool           `json:"paused"`
	Held                 bool           `json:"held"`    // the operator holds the queue
	Stale                bool           `json:"stale"`   // the instance answers on what it knew last; nobody is admitted
	Message              string         `json:"message"` // the operator's, any state
	Challenge            *Challenge     `json:"challenge"`
	AdmissionToken       string         `json:"admissionToken"`
	ExpiresIn            int64          `json:"expiresIn"`
	// QueueIsFull (sold_out): no unit can come back; false while pending
	// holds may give some back (ask again after PollAfterMs).
	QueueIsFull bool `json:"queueIsFull"`
}

// Policy is a sale's fairness policy in plain words, with the draw's
// commitment (and, from the open or the draw, its seed); a lottery's has
// its rules too.
type Policy struct {
	Policy                string     `json:"policy"`
	Description           string     `json:"description"`
	DrawCommitment        string     `json:"drawCommitment"`
	DrawSeed              *string    `json:"drawSeed"`
	RegistrationOpensAt   *time.Time `json:"registrationOpensAt"`
	RegistrationClosesAt  *time.Time `json:"registrationClosesAt"`
	DrawAt                *time.Time `json:"drawAt"`
	PurchaseWindowSeconds int        `json:"purchaseWindowSeconds"`
	Waitlist              bool       `json:"waitlist"`
	Units                 int        `json:"units"`
	DrawAlgorithm         string     `json:"drawAlgorithm"`
	DrawnAt               *time.Time `json:"drawnAt"`
	// A waiting room's: what the page shows of the sale.
	Title    string     `json:"title"`
	ImageURL *string    `json:"imageUrl"`
	OpensAt  *time.Time `json:"opensAt"`
}

// Health is the answer of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// Result is an answer and, when its status is 2xx, its body decoded. The
// status, headers (RetryAfter, Replayed) and raw body stay at hand; an error
// answer's code is Code().
type Result[T any] struct {
	Response
	Value T
}

// call sends req and decodes a 2xx answer's body into the result's Value.
func call[T any](ctx context.Context, c *Client, req Request) (Result[T], error) {
	resp, err := c.Do(ctx, req)
	res := Result[T]{Response: resp}
	if err != nil || resp.Status < 200 || resp.Status > 299 {
		return res, err
	}
	if err := json.Unmarshal(resp.Body, &res.Value); err != nil {
		return res, fmt.Errorf("client: %s %s answered %d with a body that is not the contract's: %w", req.Method, req.Path, resp.Status, err)
	}
	return res, nil
}

func salePath(saleID string) string { return "/sales/" + url.PathEscape(saleID) }

func adminSalePath(saleID string) string { return "/admin/sales/" + url.PathEscape(saleID) }

func reservationPath(id string) string { return "/reservations/" + url.PathEscape(id) }

// Admin.

// CreateSale is POST /admin/sales: 201 sale.
func (c *Client) CreateSale(ctx context.Context, adminToken string, sale NewSale) (Result[Sale], error) {
	body, err := json.Marshal(sale)
	if err != nil {
		return Result[Sale]{}, err
	}
	return c.CreateSaleJSON(ctx, adminToken, string(body))
}

// CreateSaleJSON is POST /admin/sales with the body as given.
func (c *Client) CreateSaleJSON(ctx context.Context, adminToken, body string) (Result[Sale], error) {
	return call[Sale](ctx, c, Request{Method: http.MethodPost, Path: "/admin/sales", Token: adminToken, Body: body})
}

// Sale is GET /admin/sales/{id}: the sale with live counts.
func (c *Client) Sale(ctx context.Context, adminToken, saleID string) (Result[Sale], error) {
	return call[Sale](ctx, c, Request{Method: http.MethodGet, Path: adminSalePath(saleID), Token: adminToken})
}

// OpenSale is POST /admin/sales/{id}/open.
func (c *Client) OpenSale(ctx context.Context, adminToken, saleID string) (Result[Sale], error) {
	return c.saleAction(ctx, adminToken, saleID, "open")
}

// PauseSale is POST /admin/sales/{id}/pause.
func (c *Client) PauseSale(ctx context.Context, adminToken, saleID string) (Result[Sale], error) {
	return c.saleAction(ctx, adminToken, saleID, "pause")
}

// ResumeSale is POST /admin/sales/{id}/resume (409 invariant_broken while
// the stock does not add up).
func (c *Client) ResumeSale(ctx context.Context, adminToken, saleID string) (Result[Sale], error) {
	return c.saleAction(ctx, adminToken, saleID, "resume")
}

// CloseSale is POST /admin/sales/{id}/close.
func (c *Client) CloseSale(ctx context.Context, adminToken, saleID string) (Result[Sale], error) {
	return c.saleAction(ctx, adminToken, saleID, "close")
}

// GateCounter is the answer to a gate rebuild: the Redis counter now.
type GateCounter struct {
	Counter int64 `json:"counter"`
}

// RebuildGate is POST /admin/sales/{id}/gate/rebuild: a paused gated sale's
// Redis counter made again from the database (instances with Redis only).
func (c *Client) RebuildGate(ctx context.Context, adminToken, saleID string) (Result[GateCounter], error) {
	return call[GateCounter](ctx, c, Request{Method: http.MethodPost, Path: adminSalePath(saleID) + "/gate/rebuild", Token: adminToken})
}

func (c *Client) saleAction(ctx context.Context, adminToken, saleID, action string) (Result[Sale], error) {
	return call[Sale](ctx, c, Request{Method: http.MethodPost, Path: adminSalePath(saleID) + "/" + action, Token: adminToken})
}

// Customers.

// ReserveRequest is what POST /sales/{id}/reservations needs.
type ReserveRequest struct {
	SaleID         string
	IdempotencyKey string // sent when not empty
	Quantity       int
	// PaymentInstrument is the card's fingerprint; sent when not empty.
	PaymentInstrument string
	// AdmissionToken is sent as X-Admission-Token when not empty (sales
	// behind a waiting room).
	AdmissionToken string
}

// Reserve is POST /sales/{id}/reservations: 201 reservation (replays:
// Replayed() and the same bytes).
func (c *Client) Reserve(ctx context.Context, token string, r ReserveRequest) (Result[Reservation], error) {
	body, err := json.Marshal(struct {
		Quantity          int    `json:"quantity"`
		PaymentInstrument string `json:"paymentInstrument,omitempty"`
	}{r.Quantity, r.PaymentInstrument})
	if err != nil {
		return Result[Reservation]{}, err
	}
	var h []string
	if r.IdempotencyKey != "" {
		h = append(h, "Idempotency-Key", r.IdempotencyKey)
	}
	if r.AdmissionToken != "" {
		h = append(h, "X-Admission-Token", r.AdmissionToken)
	}
	return call[Reservation](ctx, c, Request{Method: http.MethodPost, Path: salePath(r.SaleID) + "/reservations", Token: token, Body: string(body), Header: h})
}

// Reservation is GET /reservations/{id} (its owner or the admin).
func (c *Client) Reservation(ctx context.Context, token, reservationID string) (Result[Reservation], error) {
	return call[Reservation](ctx, c, Request{Method: http.MethodGet, Path: reservationPath(reservationID), Token: token})
}

// Confirm is POST /reservations/{id}/confirm: the order (the same one when
// repeated).
func (c *Client) Confirm(ctx context.Context, token, reservationID string) (Result[Order], error) {
	return call[Order](ctx, c, Request{Method: http.MethodPost, Path: reservationPath(reservationID) + "/confirm", Token: token})
}

// Cancel is POST /reservations/{id}/cancel: the reservation, cancelled.
func (c *Client) Cancel(ctx context.Context, token, reservationID string) (Result[Reservation], error) {
	return call[Reservation](ctx, c, Request{Method: http.MethodPost, Path: reservationPath(reservationID) + "/cancel", Token: token})
}

// Ticket is GET /sales/{id}/ticket: a place in the waiting room, or, with
// held (a ticket this customer holds), that ticket again.
func (c *Client) Ticket(ctx context.Context, token, saleID, held string) (Result[Ticket], error) {
	path := salePath(saleID) + "/ticket"
	if held != "" {
		path += "?" + url.Values{"token": {held}}.Encode()
	}
	return call[Ticket](ctx, c, Request{Method: http.MethodGet, Path: path, Token: token})
}

// Status is GET /sales/{id}/status: where the ticket stands; solution
// (optional) answers the sale's challenge.
func (c *Client) Status(ctx context.Context, token, saleID, ticket, solution string) (Result[Status], error) {
	q := url.Values{"token": {ticket}}
	if solution != "" {
		q.Set("solution", solution)
	}
	return call[Status](ctx, c, Request{Method: http.MethodGet, Path: salePath(saleID) + "/status?" + q.Encode(), Token: token})
}

// Policy is GET /sales/{id}/policy (public).
func (c *Client) Policy(ctx context.Context, saleID string) (Result[Policy], error) {
	return call[Policy](ctx, c, Request{Method: http.MethodGet, Path: salePath(saleID) + "/policy"})
}

// Operations.

// Healthz is GET /healthz: the process is up.
func (c *Client) Healthz(ctx context.Context) (Result[Health], error) {
	return call[Health](ctx, c, Request{Method: http.MethodGet, Path: "/healthz"})
}

// Readyz is GET /readyz: the database is reachable and migrations current
// (a 503's body is a Health too, left in Body).
func (c *Client) Readyz(ctx context.Context) (Result[Health], error) {
	return call[Health](ctx, c, Request{Method: http.MethodGet, Path: "/readyz"})
}

// OpenAPI is GET /openapi.json: the contract this client speaks, as an
// OpenAPI 3.1 document, in Body.
func (c *Client) OpenAPI(ctx context.Context) (Response, error) {
	return c.Do(ctx, Request{Method: http.MethodGet, Path: "/openapi.json"})
}

// Metrics is GET /metrics (the admin's): Prometheus's text format in Body.
func (c *Client) Metrics(ctx context.Context, adminToken string) (Response, error) {
	return c.Do(ctx, Request{Method: http.MethodGet, Path: "/metrics", Token: adminToken})
}
