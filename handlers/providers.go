package handlers

import (
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/webhook"
)

// Payment providers' own webhooks: Stripe's events (POST /payments/stripe)
// and Adyen's standard notifications (POST /payments/adyen), as the
// providers send them. Each is authenticated by the provider's signature,
// mapped to a flashline.PaymentEvent and applied by the one path Flashline's
// own events take (applyPayment: Store.ApplyPaymentEvent, once per event
// id). What the store's checkout must set is in docs/integration.md: the
// reservation id in the payment's metadata.reservation_id (Stripe) or as
// its merchantReference (Adyen).

// MaxProviderEventBytes bounds a provider's webhook body. Stripe's events
// embed the whole object (a charge with its refunds: a few KiB), Adyen's
// notifications a few items; far more than either sends.
const MaxProviderEventBytes = 256 << 10

// Event ids are namespaced by provider: payment_events holds every
// provider's ids (and Flashline's own) under one primary key.
const (
	stripeEventPrefix = "stripe:"
	adyenEventPrefix  = "adyen:"
)

// applyPayment applies an authenticated event and counts it: the one
// application path of every payment webhook.
func applyPayment(c *gin.Context, store flashline.Store, m *paymentMetrics, logger *slog.Logger, ev flashline.PaymentEvent) (flashline.PaymentResult, error) {
	res, err := store.ApplyPaymentEvent(c.Request.Context(), ev)
	if err != nil {
		return res, err
	}
	outcome := string(res.Outcome)
	if res.Replayed {
		outcome = "replayed"
	}
	m.events.WithLabelValues(string(res.Type), outcome).Inc()
	if res.ToRefund() {
		m.late.Inc()
		logger.WarnContext(c.Request.Context(), "handlers: late payment, to refund",
			"event_id", res.EventID, "reservation_id", res.ReservationID, "payment_reference", ev.PaymentReference,
			"outcome", res.Outcome)
	}
	if res.InstrumentMismatch() {
		m.mismatch.Inc()
		logger.WarnContext(c.Request.Context(), "handlers: the provider reported another instrument than the token claimed; the provider's counted",
			"event_id", res.EventID, "reservation_id", res.ReservationID, "sale_id", res.SaleID,
			"claimed_instrument", res.ClaimedInstrument, "reported_instrument", res.Instrument, "outcome", res.Outcome)
	}
	if res.OverdueForInstrument > 0 && !res.Replayed {
		m.overdue.Inc()
		logger.WarnContext(c.Request.Context(), "handlers: payments wait for their instrument's report and none comes: is the Stripe endpoint subscribed to charge.succeeded?",
			"sale_id", res.SaleID, "event_id", res.EventID, "waiting_past_bound", res.OverdueForInstrument,
			"bound", flashline.InstrumentReportOverdue)
	}
	return res, nil
}

// applyAndAnswer applies an authenticated event (applyPayment) and answers
// it: 200 with its outcome, or the error's answer. The ending of every
// handler that answers one event, Flashline's own and Stripe's; Adyen's
// answers a whole notification its own way.
func applyAndAnswer(c *gin.Context, store flashline.Store, m *paymentMetrics, logger *slog.Logger, ev flashline.PaymentEvent) {
	res, err := applyPayment(c, store, m, logger, ev)
	if err != nil {
		writeError(c, logger, err)
		return
	}
	writeJSON(c, http.StatusOK, NewPaymentResultView(res))
}

// mappedHash identifies a provider's event by what Flashline reads of it
// (not its raw body): a redelivery is the same event even if the provider
// serialises it anew, and the same id carrying another payment is refused
// (ErrEventIDReused).
func mappedHash(ev flashline.PaymentEvent) []byte {
	amount := "-"
	if ev.Amount != nil {
		amount = strconv.FormatInt(*ev.Amount, 10)
	}
	h := sha256.Sum256([]byte(strings.Join([]string{
		string(ev.Type), ev.ReservationID, ev.PaymentReference, amount, ev.Currency, ev.Reason, ev.Instrument,
	}, "\x00")))
	return h[:]
}

// ignored answers an event Flashline does not act on: 200, so that the
// provider does not retry it.
func ignored(c *gin.Context, eventID, typ, why string) {
	writeJSON(c, http.StatusOK, api.IgnoredEvent{EventID: eventID, Type: typ, Ignored: why})
}

// stripeEvent is what Flashline reads of a Stripe event. Stripe's objects
// have many more fields, and new ones appear: unknown fields are skipped.
type stripeEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Object *stripeObject `json:"object"`
	} `json:"data"`
}

// stripeObject is the part of a PaymentIntent or a Charge Flashline reads.
type stripeObject struct {
	ID             string            `json:"id"`
	Amount         int64             `json:"amount"`
	AmountReceived *int64            `json:"amount_received"` // PaymentIntent
	AmountRefunded int64             `json:"amount_refunded"` // Charge
	Currency       string            `json:"currency"`
	Refunded       bool              `json:"refunded"`       // Charge: refunded in full
	PaymentIntent  string            `json:"payment_intent"` // Charge: its PaymentIntent's id (not expanded in webhooks)
	Metadata       map[string]string `json:"metadata"`
	// PaymentMethodDetails is a Charge's: its type names the member that
	// describes the instrument, whose fingerprint identifies it
	// (payment_method_details.card.fingerprint for a card).
	PaymentMethodDetails map[string]json.RawMessage `json:"payment_method_details"`
	// CancellationReason and LastPaymentError say why, for people.
	CancellationReason string `json:"cancellation_reason"`
	LastPaymentError   *struct {
		Message string `json:"message"`
	} `json:"last_payment_error"`
}

// StripeReservationKey is the metadata key the store's checkout sets on
// the PaymentIntent: the reservation (hold) it pays for.
const StripeReservationKey = "reservation_id"

// handleStripe is POST /payments/stripe: Stripe's webhook, signed with the
// endpoint's signing secret (Stripe-Signature, the Flashline-Signature
// scheme). payment_intent.succeeded confirms the hold named by
// metadata.reservation_id; payment_intent.payment_failed and
// payment_intent.canceled cancel it; charge.refunded (refunded in full)
// voids the order. charge.succeeded reports the instrument that paid (its
// payment_method_details' fingerprint) for its payment_intent: a
// PaymentIntent's event no longer embeds its charges, so in a sale with a
// perInstrumentLimit the two events meet by the intent's id, in either
// order, and the second applies the payment (the store's
// ApplyPaymentEvent). Every other event, a partial refund, and an object with
// no reservation_id (a payment that is not a Flashline hold's) is answered
// 200 and ignored, as Stripe expects of an endpoint.
func handleStripe(store flashline.Store, verifier *webhook.Verifier, m *paymentMetrics, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, err := signedBody(c, verifier, webhook.StripeHeader, MaxProviderEventBytes, flashline.ErrProviderNotConfigured)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		var e stripeEvent
		if err := json.Unmarshal(body, &e); err != nil {
			writeError(c, logger, flashline.Invalid("malformed Stripe event: "+err.Error()))
			return
		}
		if e.ID == "" || e.Type == "" || e.Data.Object == nil {
			writeError(c, logger, flashline.Invalid("a Stripe event has id, type and data.object"))
			return
		}
		ev, why := stripePaymentEvent(e)
		if why != "" {
			ignored(c, e.ID, e.Type, why)
			return
		}
		applyAndAnswer(c, store, m, logger, ev)
	}
}

// stripePaymentEvent maps a Stripe event to a payment event, or says why
// it is ignored.
func stripePaymentEvent(e stripeEvent) (flashline.PaymentEvent, string) {
	o := e.Data.Object
	ev := flashline.PaymentEvent{
		ID:            stripeEventPrefix + e.ID,
		ReservationID: o.Metadata[StripeReservationKey],
		Currency:      strings.ToUpper(o.Currency),
	}
	switch e.Type {
	case "payment_intent.succeeded":
		amount := o.Amount
		if o.AmountReceived != nil {
			amount = *o.AmountReceived
		}
		ev.Type, ev.PaymentReference, ev.Amount = flashline.PaymentSucceeded, o.ID, &amount
		ev.AwaitInstrument = true // charge.succeeded reports it
	case "charge.succeeded":
		if o.PaymentIntent == "" {
			return ev, "a charge without a PaymentIntent: Flashline's holds are paid by PaymentIntents"
		}
		// A charge whose instrument has no fingerprint is reported as
		// none: its payment waits no more, and counts for no instrument.
		instrument := stripeInstrument(o.PaymentMethodDetails)
		ev.Type, ev.PaymentReference, ev.Instrument, ev.Currency = flashline.InstrumentReported, o.PaymentIntent, instrument, ""
	case "payment_intent.payment_failed":
		ev.Type, ev.PaymentReference = flashline.PaymentFailed, o.ID
		if o.LastPaymentError != nil {
			ev.Reason = o.LastPaymentError.Message
		}
	case "payment_intent.canceled":
		ev.Type, ev.PaymentReference, ev.Reason = flashline.PaymentFailed, o.ID, "canceled"
		if o.CancellationReason != "" {
			ev.Reason += ": " + o.CancellationReason
		}
	case "charge.refunded":
		if !o.Refunded {
			return ev, "a partial refund: the order stands"
		}
		// The order's payment reference is the PaymentIntent's id.
		ref := o.PaymentIntent
		if ref == "" {
			ref = o.ID
		}
		amount := o.AmountRefunded
		ev.Type, ev.PaymentReference, ev.Amount = flashline.RefundSucceeded, ref, &amount
	default:
		return ev, "an event type Flashline does not act on"
	}
	if ev.ReservationID == "" {
		return ev, "no metadata." + StripeReservationKey + ": not a payment for a Flashline hold"
	}
	ev.Reason = cleanReason(ev.Reason)
	ev.Hash = mappedHash(ev)
	return ev, ""
}

// stripeInstrument is the instrument a Charge's payment_method_details
// describe: the member its type names (card, sepa_debit, us_bank_account,
// ...) and that member's fingerprint, as "card:<fingerprint>"; "" when there
// is none Flashline can count. Stripe computes a card's fingerprint from
// its number: the same card is the same fingerprint in every charge.
func stripeInstrument(details map[string]json.RawMessage) string {
	var typ string
	if raw, ok := details["type"]; !ok || json.Unmarshal(raw, &typ) != nil || typ == "" || typ == "type" {
		return ""
	}
	var member struct {
		Fingerprint string `json:"fingerprint"`
	}
	if raw, ok := details[typ]; !ok || json.Unmarshal(raw, &member) != nil || member.Fingerprint == "" {
		return ""
	}
	instrument, err := flashline.NormalizeInstrument(typ + ":" + member.Fingerprint)
	if err != nil {
		return ""
	}
	return instrument
}

// adyenNotification is Adyen's standard notification: one or more items.
type adyenNotification struct {
	Live              string `json:"live"`
	NotificationItems []struct {
		Item *adyenItem `json:"NotificationRequestItem"`
	} `json:"notificationItems"`
}

// adyenItem is what Flashline reads of a notification item.
type adyenItem struct {
	AdditionalData map[string]json.RawMessage `json:"additionalData"`
	Amount         struct {
		Value    int64  `json:"value"`
		Currency string `json:"currency"`
	} `json:"amount"`
	EventCode           string `json:"eventCode"`
	MerchantAccountCode string `json:"merchantAccountCode"`
	MerchantReference   string `json:"merchantReference"`
	OriginalReference   string `json:"originalReference"`
	PSPReference        string `json:"pspReference"`
	Reason              string `json:"reason"`
	Success             string `json:"success"`
}

// maxAdyenItems bounds a notification's items (Adyen sends one, or a few).
const maxAdyenItems = 100

// handleAdyen is POST /payments/adyen: Adyen's standard notifications, each
// item signed with the webhook's HMAC key (additionalData.hmacSignature).
// Every item's signature is checked before any is applied; then
// AUTHORISATION (success) confirms the hold named by merchantReference,
// AUTHORISATION (failure) and CANCELLATION cancel it, REFUND voids the
// order; other items are accepted and ignored. The answer is "[accepted]",
// the one Adyen expects; an error answer has Adyen send the whole
// notification again (its items already applied are replays).
func handleAdyen(store flashline.Store, verifier *webhook.AdyenVerifier, m *paymentMetrics, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if verifier == nil {
			writeError(c, logger, flashline.ErrProviderNotConfigured)
			return
		}
		body, err := readBody(c, MaxProviderEventBytes)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		var n adyenNotification
		if err := json.Unmarshal(body, &n); err != nil {
			writeError(c, logger, flashline.Invalid("malformed Adyen notification: "+err.Error()))
			return
		}
		if len(n.NotificationItems) == 0 || len(n.NotificationItems) > maxAdyenItems {
			writeError(c, logger, flashline.Invalid("an Adyen notification has 1-100 notificationItems"))
			return
		}
		items := make([]*adyenItem, len(n.NotificationItems))
		for i, w := range n.NotificationItems {
			it := w.Item
			if it == nil {
				writeError(c, logger, flashline.Invalid("every notificationItems entry is a NotificationRequestItem"))
				return
			}
			var sig string
			if raw, ok := it.AdditionalData["hmacSignature"]; !ok || json.Unmarshal(raw, &sig) != nil {
				writeError(c, logger, flashline.ErrSignatureInvalid)
				return
			}
			if err := verifier.Verify(webhook.AdyenItem{
				PSPReference: it.PSPReference, OriginalReference: it.OriginalReference,
				MerchantAccountCode: it.MerchantAccountCode, MerchantReference: it.MerchantReference,
				Value: it.Amount.Value, Currency: it.Amount.Currency, EventCode: it.EventCode, Success: it.Success,
			}, sig); err != nil {
				writeError(c, logger, err)
				return
			}
			items[i] = it
		}
		for _, it := range items {
			ev, why := adyenPaymentEvent(it)
			if why != "" {
				logger.DebugContext(c.Request.Context(), "handlers: Adyen item ignored",
					"event_code", it.EventCode, "psp_reference", it.PSPReference, "why", why)
				continue
			}
			if _, err := applyPayment(c, store, m, logger, ev); err != nil {
				writeError(c, logger, err)
				return
			}
		}
		c.Set(outcomeKey, outcomeForStatus(http.StatusOK))
		c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte("[accepted]"))
	}
}

// adyenPaymentEvent maps a notification item to a payment event, or says
// why it is ignored. The event id is the item's pspReference with its
// event code and success: Adyen resends an item with the same three.
func adyenPaymentEvent(it *adyenItem) (flashline.PaymentEvent, string) {
	ev := flashline.PaymentEvent{
		ID:            adyenEventPrefix + it.EventCode + ":" + it.PSPReference + ":" + it.Success,
		ReservationID: it.MerchantReference,
		Currency:      strings.ToUpper(it.Amount.Currency),
		Reason:        it.Reason,
	}
	success := it.Success == "true"
	switch it.EventCode {
	case "AUTHORISATION":
		amount := it.Amount.Value
		ev.PaymentReference, ev.Amount = it.PSPReference, &amount
		ev.Type = flashline.PaymentSucceeded
		if !success {
			ev.Type, ev.Amount = flashline.PaymentFailed, nil
		} else {
			ev.Instrument = adyenInstrument(it.AdditionalData)
		}
	case "CANCELLATION":
		if !success {
			return ev, "a cancellation that failed: the payment stands"
		}
		ev.Type, ev.PaymentReference = flashline.PaymentFailed, it.OriginalReference
	case "REFUND":
		if !success {
			return ev, "a refund that failed: the order stands"
		}
		amount := it.Amount.Value
		ev.Type, ev.PaymentReference, ev.Amount = flashline.RefundSucceeded, it.OriginalReference, &amount
	default:
		return ev, "an event code Flashline does not act on"
	}
	if ev.ReservationID == "" {
		return ev, "no merchantReference: not a payment for a Flashline hold"
	}
	if ev.PaymentReference == "" {
		ev.PaymentReference = it.PSPReference
	}
	ev.Reason = cleanReason(ev.Reason)
	ev.Hash = mappedHash(ev)
	return ev, ""
}

// adyenInstrument is the instrument an AUTHORISATION item's additionalData
// names, when the merchant has Adyen add it to its notifications: the card's
// alias ("alias", one per card number, across the company's merchant
// accounts), else the card network's Payment Account Reference
// ("paymentAccountReference"); "" when neither is there. Weaker than
// Stripe's fingerprint: additionalData is outside the item's HMAC
// signature (docs/payments.md).
func adyenInstrument(data map[string]json.RawMessage) string {
	for _, k := range []struct{ key, prefix string }{{"alias", "alias:"}, {"paymentAccountReference", "par:"}} {
		var v string
		if raw, ok := data[k.key]; !ok || json.Unmarshal(raw, &v) != nil || strings.TrimSpace(v) == "" {
			continue
		}
		if instrument, err := flashline.NormalizeInstrument(k.prefix + v); err == nil {
			return instrument
		}
	}
	return ""
}

// cleanReason keeps a provider's reason when it is text, cut to the
// longest a payment event's may be: it is for people, and a reason Flashline
// cannot store must not have the provider retry the event forever.
func cleanReason(s string) string {
	s = truncateText(s, flashline.MaxPaymentReason)
	if !flashline.ValidText(s) {
		return ""
	}
	return s
}

// truncateText cuts s to at most n bytes, on a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
