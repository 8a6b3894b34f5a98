package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashline/flashline/api"
)

// The contract's JSON shapes are package api's, one set for the server and
// its clients: the client decodes every answer into the type the server
// fills (these aliases; times arrive as the strings the server writes, read
// with Time). What the client sends (NewSale, ReserveRequest, PaymentEvent)
// and Policy, which decodes both a waiting room's policy and a lottery's,
// are its own, checked against the document (TestTypesMatchTheDocument).
type (
	Order            = api.Order
	Challenge        = api.Challenge
	PositionRange    = api.PositionRange
	Ticket           = api.Ticket
	Gate             = api.Gate
	PaymentResult    = api.PaymentResult
	Extended         = api.Extended
	VoidResult       = api.VoidResult
	BulkVoided       = api.BulkVoided
	LotteryCounts    = api.LotteryCounts
	Queue            = api.Queue
	Sale             = api.Sale
	SaleList         = api.SaleList
	Invariant        = api.Invariant
	Reservation      = api.Reservation
	Status           = api.Status
	LatePayment      = api.LatePayment
	LatePaymentList  = api.LatePayments
	Lottery          = api.Lottery
	Registration     = api.Registration
	DrawTranscript   = api.DrawTranscript
	TranscriptBeacon = api.TranscriptBeacon
)

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
	Price                 *Price     `json:"price,omitempty"`
	// Variants: a sale with variants (then send it with CreateSaleJSON,
	// without initialStock).
	Variants []NewVariant `json:"variants,omitempty"`
	// A lottery sale's (Admission "lottery").
	RegistrationOpensAt   *time.Time `json:"registrationOpensAt,omitempty"`
	RegistrationClosesAt  *time.Time `json:"registrationClosesAt,omitempty"`
	DrawAt                *time.Time `json:"drawAt,omitempty"`
	PurchaseWindowSeconds int        `json:"purchaseWindowSeconds,omitempty"`
	Waitlist              bool       `json:"waitlist,omitempty"`
}

// NewVariant is one variant of a new sale.
type NewVariant struct {
	SKU     string `json:"sku"`
	Title   string `json:"title,omitempty"`
	Stock   int    `json:"stock"`
	Buckets int    `json:"buckets,omitempty"`
}

// Price is a sale's price: an amount in the currency's minor units.
type Price struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
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
	// A lottery's: the registrants' root (from the close), the beacon (nil:
	// none) and where the draw's transcript is.
	RegistrantsRoot *string               `json:"registrantsRoot"`
	Beacon          *api.TranscriptBeacon `json:"beacon"`
	Transcript      string                `json:"transcript"`
	// A lottery with variants': each variant and its units (nil: none).
	Variants []api.LotteryPolicyVariant `json:"variants"`
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

// SalePage is what GET /admin/sales asks for: zero fields are left out
// (the server's default page, every state, from the newest).
type SalePage struct {
	States []string
	Limit  int
	After  string
}

// Sales is GET /admin/sales: a page of sales, newest first.
func (c *Client) Sales(ctx context.Context, adminToken string, p SalePage) (Result[SaleList], error) {
	q := url.Values{}
	for _, st := range p.States {
		q.Add("state", st)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	path := "/admin/sales"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return call[SaleList](ctx, c, Request{Method: http.MethodGet, Path: path, Token: adminToken})
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
	// Variant is the variant's SKU, for a sale with variants; sent when
	// not empty.
	Variant string
}

// Reserve is POST /sales/{id}/reservations: 201 reservation (replays:
// Replayed() and the same bytes).
func (c *Client) Reserve(ctx context.Context, token string, r ReserveRequest) (Result[Reservation], error) {
	body, err := json.Marshal(struct {
		Quantity          int    `json:"quantity"`
		PaymentInstrument string `json:"paymentInstrument,omitempty"`
		Variant           string `json:"variant,omitempty"`
	}{r.Quantity, r.PaymentInstrument, r.Variant})
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

// OwnReservation is GET /sales/{id}/reservation: the customer's own active
// reservation in the sale (404 when none).
func (c *Client) OwnReservation(ctx context.Context, token, saleID string) (Result[Reservation], error) {
	return call[Reservation](ctx, c, Request{Method: http.MethodGet, Path: salePath(saleID) + "/reservation", Token: token})
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

// DrawTranscript is GET /sales/{id}/draw: a lottery's draw transcript (no
// authentication).
func (c *Client) DrawTranscript(ctx context.Context, saleID string) (Result[DrawTranscript], error) {
	return call[DrawTranscript](ctx, c, Request{Method: http.MethodGet, Path: salePath(saleID) + "/draw"})
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

// Time reads a time of the contract, RFC 3339 as the server writes it
// (handlers' views carry times as strings); zero when s is empty or not one.
func Time(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// TimeOf is Time of an optional time (nil: zero).
func TimeOf(s *string) time.Time {
	if s == nil {
		return time.Time{}
	}
	return Time(*s)
}
