package handlers

import (
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/webhook"
)

// MaxPaymentEventBytes is the largest payment event accepted: an event is a
// few hundred bytes.
const MaxPaymentEventBytes = 16 << 10

// maxLatePayments bounds the late-payment list.
const maxLatePayments = 500

// paymentEventRequest is the body of POST /payments/events.
type paymentEventRequest struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// paymentEventData is an event's data; which fields each type needs is
// flashline.PaymentEvent.Validate's.
type paymentEventData struct {
	ReservationID    string `json:"reservationId"`
	PaymentReference string `json:"paymentReference"`
	Amount           *int64 `json:"amount"`
	Currency         string `json:"currency"`
	Reason           string `json:"reason"`
	// PaymentInstrument is the instrument that paid, as the provider
	// reported it (a card's fingerprint): the payment side names it, so a
	// sale's perInstrumentLimit counts it (payment.succeeded only).
	PaymentInstrument string `json:"paymentInstrument"`
}

// paymentMetrics counts payment events by type and outcome, and late
// payments on their own (what an operator must refund).
type paymentMetrics struct {
	events   *prometheus.CounterVec
	late     prometheus.Counter
	mismatch prometheus.Counter
	overdue  prometheus.Counter
}

func newPaymentMetrics(reg prometheus.Registerer) *paymentMetrics {
	m := &paymentMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_payment_events_total",
			Help: "Payment events applied, by type and outcome (replayed: delivered again, no effect).",
		}, []string{"type", "outcome"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_late_payments_total",
			Help: "Payments for holds that had expired, were cancelled or voided, or were paid already: recorded to refund, no stock taken.",
		}),
		mismatch: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_payment_instrument_mismatches_total",
			Help: "Payments whose provider reported another instrument than the customer token's payment_instrument claim: the provider's counted.",
		}),
		overdue: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_instrument_reports_overdue_total",
			Help: "Payment successes that waited for their instrument's report while others of the sale had waited past the bound with no report coming (Stripe: the endpoint not subscribed to charge.succeeded?).",
		}),
	}
	reg.MustRegister(m.events, m.late, m.mismatch, m.overdue)
	return m
}

// handlePaymentEvent is POST /payments/events: an event signed by the
// payment side (webhook: Flashline-Signature). The signature is checked on
// the raw body before anything in it is read; then the event is applied once
// per id (flashline.Store.ApplyPaymentEvent).
func handlePaymentEvent(store flashline.Store, verifier *webhook.Verifier, m *paymentMetrics, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, err := signedBody(c, verifier, webhook.Header, MaxPaymentEventBytes, flashline.ErrPaymentsNotConfigured)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		ev, err := parsePaymentEvent(body)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		applyAndAnswer(c, store, m, logger, ev)
	}
}

// signedBody reads a webhook's body, at most limit bytes, and checks its
// signature in header (the Flashline-Signature scheme, which Stripe's is)
// before anything in it is read. A service with no secret for the route
// answers notConfigured.
func signedBody(c *gin.Context, verifier *webhook.Verifier, header string, limit int64, notConfigured error) ([]byte, error) {
	if verifier == nil {
		return nil, notConfigured
	}
	body, err := readBody(c, limit)
	if err != nil {
		return nil, err
	}
	if err := verifier.Verify(c.GetHeader(header), body); err != nil {
		return nil, err
	}
	return body, nil
}

// parsePaymentEvent decodes an authenticated event's body strictly (no
// unknown field at any level) and checks it (flashline.PaymentEvent.Validate).
// Any failure is an *flashline.InvalidError, or ErrUnknownReservation for a
// reservation id of a shape the service never makes.
func parsePaymentEvent(body []byte) (flashline.PaymentEvent, error) {
	var req paymentEventRequest
	if err := decodeBytes(body, &req); err != nil {
		return flashline.PaymentEvent{}, err
	}
	if len(req.Data) == 0 || string(req.Data) == "null" {
		return flashline.PaymentEvent{}, flashline.Invalid("data is required")
	}
	var data paymentEventData
	if err := decodeBytes(req.Data, &data); err != nil {
		return flashline.PaymentEvent{}, flashline.Invalid("data: " + lookupError(err).message)
	}
	if req.Type == string(flashline.InstrumentReported) {
		// The providers' webhooks' own; Flashline's events name the
		// instrument with the payment.
		return flashline.PaymentEvent{}, flashline.Invalid(`type must be "payment.succeeded", "payment.failed" or "refund.succeeded"`)
	}
	instrument, err := flashline.NormalizeInstrument(data.PaymentInstrument)
	if err != nil {
		return flashline.PaymentEvent{}, flashline.Invalid("data." + err.Error())
	}
	if instrument != "" && req.Type != string(flashline.PaymentSucceeded) {
		return flashline.PaymentEvent{}, flashline.Invalid("data.paymentInstrument is for payment.succeeded only")
	}
	hash := sha256.Sum256(body)
	ev := flashline.PaymentEvent{
		Instrument:       instrument,
		ID:               req.ID,
		Type:             flashline.PaymentEventType(req.Type),
		ReservationID:    data.ReservationID,
		PaymentReference: data.PaymentReference,
		Amount:           data.Amount,
		Currency:         data.Currency,
		Reason:           data.Reason,
		Hash:             hash[:],
	}
	return ev, ev.Validate()
}

// handleLatePayments is GET /admin/payments/late[?all=true].
func handleLatePayments(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		all := false
		switch c.Query("all") {
		case "", "false":
		case "true":
			all = true
		default:
			writeError(c, logger, flashline.Invalid(`all must be "true" or "false"`))
			return
		}
		late, err := store.LatePayments(c.Request.Context(), all, maxLatePayments)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		v := api.LatePayments{LatePayments: make([]api.LatePayment, len(late))}
		for i, l := range late {
			v.LatePayments[i] = NewLatePaymentView(l)
		}
		writeJSON(c, http.StatusOK, v)
	}
}
