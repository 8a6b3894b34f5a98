package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v84/webhook"

	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/webhook"
)

// The payment providers' own webhooks against real `flashline serve`
// processes and real PostgreSQL: Stripe's events signed by stripe-go's
// webhook.GenerateTestSignedPayload (the library Stripe's Go users verify
// with), Adyen's notifications signed as Adyen documents it.

// Two Stripe signing secrets configured at once: the endpoint's secret is
// being rolled.
const (
	stripeSecret     = "whsec_test_flashline_0123456789abcdefABCDEF"
	stripeNextSecret = "whsec_test_flashline_next_0123456789abcdef"
	adyenKey         = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// stripeEvent is an event as Stripe sends it (the fields of its envelope,
// the object in data.object).
func stripeEvent(id, typ string, object map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": "2025-09-30.clover", "created": time.Now().Unix(),
		"livemode": false, "pending_webhooks": 1, "type": typ,
		"request": map[string]any{"id": "req_" + id, "idempotency_key": nil},
		"data":    map[string]any{"object": object},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func paymentIntent(id, reservationID string, amount int64, currency, status string) map[string]any {
	pi := map[string]any{
		"id": id, "object": "payment_intent", "amount": amount, "amount_received": amount,
		"currency": currency, "status": status, "capture_method": "automatic_async",
		"latest_charge": "ch_" + id, "livemode": false, "metadata": map[string]any{},
	}
	if status != "succeeded" {
		pi["amount_received"] = 0
	}
	if reservationID != "" {
		pi["metadata"] = map[string]any{"reservation_id": reservationID, "shop_order": "A-1001"}
	}
	return pi
}

func stripeCharge(piID, reservationID string, amount, refunded int64) map[string]any {
	return map[string]any{
		"id": "ch_" + piID, "object": "charge", "amount": amount, "amount_captured": amount,
		"amount_refunded": refunded, "refunded": refunded == amount, "currency": "eur",
		"payment_intent": piID, "paid": true, "status": "succeeded",
		"metadata": map[string]any{"reservation_id": reservationID},
	}
}

// signStripe signs payload as Stripe does, at time at, with secret.
func signStripe(payload []byte, at time.Time, secret string) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: payload, Secret: secret, Timestamp: at,
	}).Header
}

type providerAnswer struct {
	EventID  string `json:"eventId"`
	Outcome  string `json:"outcome"`
	State    string `json:"state"`
	OrderID  string `json:"orderId"`
	Replayed bool   `json:"replayed"`
	Ignored  string `json:"ignored"`
	Error    struct {
		Code string `json:"code"`
	} `json:"error"`
}

func postStripe(t *testing.T, c *testserver.Client, base string, body []byte, sig string) (int, providerAnswer) {
	t.Helper()
	r, err := c.Do(context.Background(), http.MethodPost, base+"/payments/stripe", "", string(body), "Stripe-Signature", sig)
	require.NoError(t, err)
	var a providerAnswer
	require.NoError(t, json.Unmarshal(r.Body, &a), "%d %s", r.Status, r.Body)
	return r.Status, a
}

func requireStripe(t *testing.T, c *testserver.Client, base string, body []byte, outcome string) providerAnswer {
	t.Helper()
	status, a := postStripe(t, c, base, body, signStripe(body, time.Now(), stripeSecret))
	require.Equal(t, http.StatusOK, status, "%+v", a)
	require.Equal(t, outcome, a.Outcome, "%+v", a)
	return a
}

func reservationState(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	return scalar[string](t, pool, `SELECT state FROM reservations WHERE reservation_id = $1`, id)
}

// TestStripeWebhook: Stripe's events, as Stripe signs and sends them, to
// three instances configured with two signing secrets (one being rolled),
// for a sale that states its price.
func TestStripeWebhook(t *testing.T) {
	_, pool, servers, c := serveOnFreshDB(t, 3, "--stripe-webhook-secret", stripeSecret+","+stripeNextSecret)
	base := servers[0].URL
	saleID := c.CreateSale(t, base, `{"sku":"sku_stripe","initialStock":40,"perCustomerLimit":2,"price":{"amount":2500,"currency":"eur"}}`)
	hold := func(who string, quantity int) string {
		t.Helper()
		r, err := c.Reserve(context.Background(), base, saleID, testserver.Token(t, who), "k", quantity)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return reservationID(t, r.Body)
	}

	t.Run("SaleStatesItsPrice", func(t *testing.T) {
		r, err := c.Do(context.Background(), http.MethodGet, base+"/admin/sales/"+saleID, testserver.AdminToken, "")
		require.NoError(t, err)
		require.Contains(t, string(r.Body), `"price":{"amount":2500,"currency":"EUR"}`)
	})

	t.Run("DeliveredRepeatedlyAndConcurrently", func(t *testing.T) {
		// Each event: three deliveries at once to each of three instances,
		// the same bytes, each delivery signed anew (as Stripe's retries).
		const holds, copies = 12, 3
		ids := make([]string, holds)
		for i := range ids {
			ids[i] = hold(fmt.Sprintf("stripe-crowd-%d", i), 2)
		}
		type answer struct {
			hold int
			a    providerAnswer
			err  string
		}
		answers := make(chan answer, holds*copies*len(servers))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for h, id := range ids {
			body := stripeEvent(fmt.Sprintf("evt_crowd_%d", h), "payment_intent.succeeded",
				paymentIntent(fmt.Sprintf("pi_crowd_%d", h), id, 5000, "eur", "succeeded"))
			for _, s := range servers {
				for k := range copies {
					wg.Go(func() {
						<-start
						secret := stripeSecret
						if k == 1 {
							secret = stripeNextSecret // either configured secret signs
						}
						r, err := c.Do(context.Background(), http.MethodPost, s.URL+"/payments/stripe", "", string(body),
							"Stripe-Signature", signStripe(body, time.Now(), secret))
						var a providerAnswer
						if err != nil || r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
							answers <- answer{hold: h, err: fmt.Sprintf("%v %d %s", err, r.Status, r.Body)}
							return
						}
						answers <- answer{hold: h, a: a}
					})
				}
			}
		}
		close(start)
		wg.Wait()
		close(answers)
		firsts := make([]int, holds)
		orders := make([]map[string]bool, holds)
		for a := range answers {
			require.Empty(t, a.err, "hold %d", a.hold)
			require.Equal(t, "confirmed", a.a.Outcome, "hold %d: %+v", a.hold, a.a)
			require.Equal(t, fmt.Sprintf("stripe:evt_crowd_%d", a.hold), a.a.EventID)
			if orders[a.hold] == nil {
				orders[a.hold] = map[string]bool{}
			}
			orders[a.hold][a.a.OrderID] = true
			if !a.a.Replayed {
				firsts[a.hold]++
			}
		}
		for h, id := range ids {
			require.Equal(t, 1, firsts[h], "hold %d applied once", h)
			require.Len(t, orders[h], 1, "hold %d: every answer names the same order", h)
			require.Equal(t, "confirmed", reservationState(t, pool, id))
			require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM payment_events WHERE reservation_id = $1`, id))
			var ref, currency string
			var amount int64
			require.NoError(t, pool.QueryRow(context.Background(),
				`SELECT payment_reference, amount, currency FROM orders WHERE reservation_id = $1`, id).Scan(&ref, &amount, &currency))
			require.Equal(t, []any{fmt.Sprintf("pi_crowd_%d", h), int64(5000), "EUR"}, []any{ref, amount, currency})
		}
	})

	t.Run("RefundAfterSuccessVoids", func(t *testing.T) {
		id := hold("stripe-refund", 1)
		requireStripe(t, c, servers[1].URL, stripeEvent("evt_r_pay", "payment_intent.succeeded", paymentIntent("pi_r", id, 2500, "eur", "succeeded")), "confirmed")
		a := requireStripe(t, c, servers[2].URL, stripeEvent("evt_r_refund", "charge.refunded", stripeCharge("pi_r", id, 2500, 2500)), "voided")
		require.NotEmpty(t, a.OrderID)
		require.Equal(t, "voided", reservationState(t, pool, id))
		require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM stock_ledger WHERE reservation_id = $1 AND reason = 'void'`, id))
	})

	t.Run("RefundBeforeSuccess", func(t *testing.T) {
		// Stripe delivers each event on its own, retries included: the
		// refund may arrive first. The payment it refunded confirms nothing
		// afterwards, and is owed nothing (it was refunded).
		id := hold("stripe-out-of-order", 1)
		requireStripe(t, c, base, stripeEvent("evt_o_refund", "charge.refunded", stripeCharge("pi_o", id, 2500, 2500)), "no_effect")
		requireStripe(t, c, servers[1].URL, stripeEvent("evt_o_pay", "payment_intent.succeeded", paymentIntent("pi_o", id, 2500, "eur", "succeeded")), "no_effect")
		require.Equal(t, "pending", reservationState(t, pool, id))
		require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE reservation_id = $1`, id))
		require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM late_payments WHERE reservation_id = $1`, id))
		// Another payment for the hold still confirms it.
		requireStripe(t, c, base, stripeEvent("evt_o_pay2", "payment_intent.succeeded", paymentIntent("pi_o2", id, 2500, "eur", "succeeded")), "confirmed")
	})

	t.Run("FailedAndCanceledCancel", func(t *testing.T) {
		failed, canceled := hold("stripe-declined", 1), hold("stripe-abandoned", 1)
		pi := paymentIntent("pi_f", failed, 2500, "eur", "requires_payment_method")
		pi["last_payment_error"] = map[string]any{"code": "card_declined", "message": "Your card was declined."}
		requireStripe(t, c, base, stripeEvent("evt_f", "payment_intent.payment_failed", pi), "cancelled")
		pi = paymentIntent("pi_c", canceled, 2500, "eur", "canceled")
		pi["cancellation_reason"] = "abandoned"
		requireStripe(t, c, servers[2].URL, stripeEvent("evt_c", "payment_intent.canceled", pi), "cancelled")
		require.Equal(t, "cancelled", reservationState(t, pool, failed))
		require.Equal(t, "cancelled", reservationState(t, pool, canceled))
	})

	t.Run("AmountChecked", func(t *testing.T) {
		// Two units at 25.00 EUR: 25.00 pays for one, and dollars are not
		// euros. Neither confirms; both are recorded to refund; the hold
		// waits for the right payment.
		id := hold("stripe-short", 2)
		requireStripe(t, c, base, stripeEvent("evt_short", "payment_intent.succeeded", paymentIntent("pi_short", id, 2500, "eur", "succeeded")), "late_payment")
		requireStripe(t, c, base, stripeEvent("evt_usd", "payment_intent.succeeded", paymentIntent("pi_usd", id, 5000, "usd", "succeeded")), "late_payment")
		require.Equal(t, "pending", reservationState(t, pool, id))
		require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM late_payments WHERE reservation_id = $1 AND reason = 'amount_mismatch'`, id))
		requireStripe(t, c, base, stripeEvent("evt_right", "payment_intent.succeeded", paymentIntent("pi_right", id, 5000, "EUR", "succeeded")), "confirmed")
		// The refund of a mismatched payment closes its late payment.
		requireStripe(t, c, base, stripeEvent("evt_short_refund", "charge.refunded", stripeCharge("pi_short", id, 2500, 2500)), "refund_recorded")
		require.Equal(t, "confirmed", reservationState(t, pool, id))
	})

	t.Run("Ignored", func(t *testing.T) {
		id := hold("stripe-ignored", 1)
		for name, body := range map[string][]byte{
			"UnknownType":   stripeEvent("evt_cust", "customer.created", map[string]any{"id": "cus_1", "object": "customer"}),
			"PartialRefund": stripeEvent("evt_partial", "charge.refunded", stripeCharge("pi_p", id, 2500, 1000)),
			"NotAHold":      stripeEvent("evt_other", "payment_intent.succeeded", paymentIntent("pi_other", "", 990, "eur", "succeeded")),
		} {
			status, a := postStripe(t, c, base, body, signStripe(body, time.Now(), stripeSecret))
			require.Equal(t, http.StatusOK, status, "%s: %+v", name, a)
			require.NotEmpty(t, a.Ignored, name)
			require.Empty(t, a.Outcome, name)
		}
		require.Equal(t, "pending", reservationState(t, pool, id))
		require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM payment_events WHERE event_id IN ('stripe:evt_cust', 'stripe:evt_partial', 'stripe:evt_other')`))
	})

	t.Run("Refused", func(t *testing.T) {
		id := hold("stripe-refused", 1)
		body := stripeEvent("evt_refused", "payment_intent.succeeded", paymentIntent("pi_refused", id, 2500, "eur", "succeeded"))
		now := time.Now()
		for name, tc := range map[string]struct {
			body []byte
			sig  string
			code string
		}{
			"Stale":       {body, signStripe(body, now.Add(-10*time.Minute), stripeSecret), "signature_expired"},
			"WrongSecret": {body, signStripe(body, now, "whsec_wrong_0123456789abcdef0123456789"), "signature_invalid"},
			"NoSignature": {body, "", "signature_invalid"},
			"BodyChanged": {append(body, ' '), signStripe(body, now, stripeSecret), "signature_invalid"},
			"BadJSON":     {[]byte(`{"id":"evt_bad",`), signStripe([]byte(`{"id":"evt_bad",`), now, stripeSecret), "invalid_request"},
			"NoObject":    {[]byte(`{"id":"evt_x","type":"payment_intent.succeeded"}`), signStripe([]byte(`{"id":"evt_x","type":"payment_intent.succeeded"}`), now, stripeSecret), "invalid_request"},
		} {
			status, a := postStripe(t, c, base, tc.body, tc.sig)
			require.Equal(t, http.StatusBadRequest, status, "%s: %+v", name, a)
			require.Equal(t, tc.code, a.Error.Code, name)
		}
		require.Equal(t, "pending", reservationState(t, pool, id))

		// Oversized: refused before its signature is checked, at 256 KiB.
		big := []byte(`{"id":"evt_big","type":"customer.updated","data":{"object":{"pad":"` + strings.Repeat("x", 300<<10) + `"}}}`)
		status, a := postStripe(t, c, base, big, signStripe(big, now, stripeSecret))
		require.Equal(t, http.StatusBadRequest, status)
		require.Equal(t, "invalid_request", a.Error.Code)

		// The same event id carrying another payment.
		requireStripe(t, c, base, body, "confirmed")
		other := stripeEvent("evt_refused", "payment_intent.succeeded", paymentIntent("pi_refused", id, 5000, "eur", "succeeded"))
		status, a = postStripe(t, c, base, other, signStripe(other, now, stripeSecret))
		require.Equal(t, http.StatusUnprocessableEntity, status)
		require.Equal(t, "event_id_reused", a.Error.Code)

		// Rotation: Stripe signs with its old and new secrets at once (a v1
		// for each), one of them ours.
		id2 := hold("stripe-rolled", 1)
		body2 := stripeEvent("evt_rolled", "payment_intent.succeeded", paymentIntent("pi_rolled", id2, 2500, "eur", "succeeded"))
		rolled := signStripe(body2, now, "whsec_some_other_endpoint_0123456789abcdef") +
			",v1=" + hex.EncodeToString(stripewebhook.ComputeSignature(now, body2, stripeNextSecret))
		status, a = postStripe(t, c, base, body2, rolled)
		require.Equal(t, http.StatusOK, status, "%+v", a)
		require.Equal(t, "confirmed", a.Outcome)
	})

	requireEachRestockedOnce(t, pool, saleID)
}

// adyenNotification is a standard notification with one item per entry,
// each signed with key as Adyen signs it.
func adyenNotification(t *testing.T, key string, items ...webhook.AdyenItem) []byte {
	t.Helper()
	var wrapped []map[string]any
	for _, it := range items {
		sig, err := webhook.SignAdyen(it, key)
		require.NoError(t, err)
		item := map[string]any{
			"additionalData":      map[string]any{"hmacSignature": sig, "authCode": "058705", "cardSummary": "1111"},
			"amount":              map[string]any{"value": it.Value, "currency": it.Currency},
			"eventCode":           it.EventCode,
			"eventDate":           time.Now().Format(time.RFC3339),
			"merchantAccountCode": it.MerchantAccountCode,
			"merchantReference":   it.MerchantReference,
			"paymentMethod":       "visa",
			"pspReference":        it.PSPReference,
			"reason":              "058705:1111:03/2030",
			"success":             it.Success,
		}
		if it.OriginalReference != "" {
			item["originalReference"] = it.OriginalReference
		}
		wrapped = append(wrapped, map[string]any{"NotificationRequestItem": item})
	}
	b, err := json.Marshal(map[string]any{"live": "false", "notificationItems": wrapped})
	require.NoError(t, err)
	return b
}

func postAdyen(t *testing.T, c *testserver.Client, base string, body []byte) (int, string) {
	t.Helper()
	r, err := c.Do(context.Background(), http.MethodPost, base+"/payments/adyen", "", string(body))
	require.NoError(t, err)
	return r.Status, string(r.Body)
}

// TestAdyenWebhook: Adyen's standard notifications, signed with the
// webhook's HMAC key, to three instances.
func TestAdyenWebhook(t *testing.T) {
	_, pool, servers, c := serveOnFreshDB(t, 3, "--adyen-hmac-key", adyenKey)
	base := servers[0].URL
	saleID := c.CreateSale(t, base, `{"sku":"sku_adyen","initialStock":20,"price":{"amount":1999,"currency":"EUR"}}`)
	hold := func(who string) string {
		t.Helper()
		r, err := c.Reserve(context.Background(), base, saleID, testserver.Token(t, who), "k", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return reservationID(t, r.Body)
	}
	item := func(code, psp, original, reservationID, success string) webhook.AdyenItem {
		return webhook.AdyenItem{PSPReference: psp, OriginalReference: original, MerchantAccountCode: "FlashlineShopECOM",
			MerchantReference: reservationID, Value: 1999, Currency: "EUR", EventCode: code, Success: success}
	}
	accepted := func(t *testing.T, base string, body []byte) {
		t.Helper()
		status, answer := postAdyen(t, c, base, body)
		require.Equal(t, http.StatusOK, status, answer)
		require.Equal(t, "[accepted]", answer)
	}

	t.Run("AuthorisationDeliveredConcurrently", func(t *testing.T) {
		id := hold("adyen-payer")
		body := adyenNotification(t, adyenKey, item("AUTHORISATION", "8816178914930001", "", id, "true"))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, s := range servers {
			for range 3 {
				wg.Go(func() {
					<-start
					status, answer := postAdyen(t, c, s.URL, body)
					if status != http.StatusOK || answer != "[accepted]" {
						t.Errorf("%d %s", status, answer)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		require.Equal(t, "confirmed", reservationState(t, pool, id))
		require.Equal(t, "8816178914930001", scalar[string](t, pool, `SELECT payment_reference FROM orders WHERE reservation_id = $1`, id))
		require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM payment_events WHERE reservation_id = $1`, id))
		require.Equal(t, "confirmed", scalar[string](t, pool, `SELECT outcome FROM payment_events WHERE event_id = 'adyen:AUTHORISATION:8816178914930001:true'`))

		// Refunded later: voided, once.
		refund := adyenNotification(t, adyenKey, item("REFUND", "8816178914930099", "8816178914930001", id, "true"))
		accepted(t, servers[1].URL, refund)
		accepted(t, servers[2].URL, refund)
		require.Equal(t, "voided", reservationState(t, pool, id))
	})

	t.Run("RefusedAndCancelled", func(t *testing.T) {
		refused, cancelled := hold("adyen-refused"), hold("adyen-cancelled")
		// One notification, several items: a refusal, an authorisation
		// later cancelled, and an event Flashline does not act on.
		accepted(t, base, adyenNotification(t, adyenKey,
			item("AUTHORISATION", "8816178914930002", "", refused, "false"),
			item("AUTHORISATION", "8816178914930003", "", cancelled, "true"),
			item("REPORT_AVAILABLE", "8816178914930004", "", "", "true"),
		))
		require.Equal(t, "cancelled", reservationState(t, pool, refused))
		require.Equal(t, "confirmed", reservationState(t, pool, cancelled))
		fresh := hold("adyen-cancel-pending")
		accepted(t, base, adyenNotification(t, adyenKey, item("CANCELLATION", "8816178914930005", "8816178914930006", fresh, "true")))
		require.Equal(t, "cancelled", reservationState(t, pool, fresh))
	})

	t.Run("AmountChecked", func(t *testing.T) {
		id := hold("adyen-short")
		short := item("AUTHORISATION", "8816178914930007", "", id, "true")
		short.Value = 999
		accepted(t, base, adyenNotification(t, adyenKey, short))
		require.Equal(t, "pending", reservationState(t, pool, id))
		require.Equal(t, "amount_mismatch", scalar[string](t, pool, `SELECT reason FROM late_payments WHERE reservation_id = $1`, id))
	})

	t.Run("Refused", func(t *testing.T) {
		id := hold("adyen-forged")
		good := adyenNotification(t, adyenKey, item("AUTHORISATION", "8816178914930008", "", id, "true"))
		wrongKey := adyenNotification(t, "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF", item("AUTHORISATION", "8816178914930008", "", id, "true"))
		// The amount changed after signing.
		tampered := strings.Replace(string(good), `"value":1999`, `"value":1`, 1)
		// A forged item after a good one: nothing of the notification applies.
		mixed := adyenNotification(t, adyenKey, item("AUTHORISATION", "8816178914930008", "", id, "true"))
		forged := adyenNotification(t, "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF", item("CANCELLATION", "8816178914930009", "8816178914930008", id, "true"))
		var m, f struct {
			Live  string `json:"live"`
			Items []any  `json:"notificationItems"`
		}
		require.NoError(t, json.Unmarshal(mixed, &m))
		require.NoError(t, json.Unmarshal(forged, &f))
		m.Items = append(m.Items, f.Items...)
		mixed, _ = json.Marshal(m)
		for name, body := range map[string]string{
			"WrongKey": string(wrongKey), "Tampered": tampered, "Mixed": string(mixed),
			"NoSignature": strings.Replace(string(good), `"hmacSignature"`, `"hmacSignatureX"`, 1),
			"BadJSON":     `{"notificationItems":[`, "NoItems": `{"live":"false","notificationItems":[]}`,
		} {
			status, answer := postAdyen(t, c, base, []byte(body))
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", name, answer)
		}
		require.Equal(t, "pending", reservationState(t, pool, id))
		accepted(t, base, good)
		require.Equal(t, "confirmed", reservationState(t, pool, id))
	})

	requireEachRestockedOnce(t, pool, saleID)
}
