package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/webhook"
)

// The per-instrument limit where the money is (issue 48): the instrument
// that counts is the one the payment provider reports, and a payment whose
// instrument has paid for the sale's limit already confirms nothing: its
// hold is cancelled, its units back once, the payment listed to refund.

const (
	stripeTestSecret = "whsec_handlers_instrument_0123456789abcdef"
	adyenTestKey     = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// providerServer serves the API with Stripe's and Adyen's webhooks
// configured.
func providerServer(t *testing.T) *server {
	t.Helper()
	return startServer(t, nil, func(d *handlers.Deps) {
		d.Stripe = webhook.NewVerifier(stripeTestSecret)
		a, err := webhook.NewAdyenVerifier(adyenTestKey)
		require.NoError(t, err)
		d.Adyen = a
	})
}

// stripe posts a Stripe event of type typ about object, signed as Stripe
// signs it, and decodes the answer (200 required).
func (s *server) stripe(t *testing.T, id, typ string, object map[string]any) api.PaymentResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": "2025-09-30.clover", "created": time.Now().Unix(),
		"livemode": false, "type": typ, "data": map[string]any{"object": object},
	})
	require.NoError(t, err)
	r := s.do(t, http.MethodPost, "/payments/stripe", "", string(body),
		webhook.StripeHeader, webhook.Sign(time.Now(), body, stripeTestSecret))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var res api.PaymentResult
	require.NoError(t, json.Unmarshal(r.Body, &res), "%s", r.Body)
	return res
}

// intentSucceeded is a PaymentIntent as payment_intent.succeeded carries it
// in current API versions: no charges embedded, the latest charge by id.
func intentSucceeded(pi, reservationID string) map[string]any {
	return map[string]any{
		"id": pi, "object": "payment_intent", "amount": 1000, "amount_received": 1000, "currency": "eur",
		"status": "succeeded", "latest_charge": "ch_" + pi, "metadata": map[string]any{"reservation_id": reservationID},
	}
}

// chargeSucceeded is the Charge of charge.succeeded: the card's fingerprint,
// the PaymentIntent it pays, the PaymentIntent's metadata copied.
func chargeSucceeded(pi, reservationID, fingerprint string) map[string]any {
	return map[string]any{
		"id": "ch_" + pi, "object": "charge", "amount": 1000, "amount_captured": 1000, "currency": "eur",
		"paid": true, "status": "succeeded", "payment_intent": pi, "refunded": false,
		"metadata": map[string]any{"reservation_id": reservationID},
		"payment_method_details": map[string]any{
			"type": "card",
			"card": map[string]any{"brand": "visa", "last4": "4242", "fingerprint": fingerprint},
		},
	}
}

// requireRefund finds reservationID's payment among the late payments, with
// its reason.
func requireRefund(t *testing.T, s *server, reservationID, reason string) {
	t.Helper()
	var found []string
	for _, l := range s.latePayments(t, true) {
		if l.ReservationID == reservationID {
			found = append(found, l.Reason)
		}
	}
	require.Equal(t, []string{reason}, found)
}

// TestInstrumentLimitThroughStripe: two customers pay with one card for a
// sale limited to one unit per instrument, through Stripe's webhook, the
// PaymentIntent's success and the charge's fingerprint arriving in either
// order: one order, one refund, the second hold's unit back once; a third
// customer's other card is not limited by the first; every event delivered
// again changes nothing.
func TestInstrumentLimitThroughStripe(t *testing.T) {
	t.Parallel()
	for _, chargeFirst := range []bool{false, true} {
		name := map[bool]string{false: "IntentFirst", true: "ChargeFirst"}[chargeFirst]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := providerServer(t) // a database of its own: the counts below are its alone
			sale := s.createSale(t, `{"sku":"sku_card_`+name+`","initialStock":5,"perCustomerLimit":1,"perInstrumentLimit":1}`)
			type payer struct{ who, card, want string }
			payers := []payer{{"alice", "fp_shared", "confirmed"}, {"bob", "fp_shared", "instrument_limit"}, {"carol", "fp_other", "confirmed"}}
			ids := make([]string, len(payers))
			type delivery struct {
				id, typ string
				object  map[string]any
			}
			var sent []delivery
			for i, p := range payers {
				ids[i] = requireCreated(t, s.reserve(t, sale.SaleID, customer(t, p.who+name), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID
				pi := fmt.Sprintf("pi_%s_%d", name, i)
				intent := delivery{"evt_pi_" + pi, "payment_intent.succeeded", intentSucceeded(pi, ids[i])}
				charge := delivery{"evt_ch_" + pi, "charge.succeeded", chargeSucceeded(pi, ids[i], p.card)}
				first, second, waits := intent, charge, "awaiting_instrument"
				if chargeFirst {
					first, second, waits = charge, intent, "instrument_recorded"
				}
				got := s.stripe(t, first.id, first.typ, first.object)
				require.Equal(t, waits, got.Outcome, "%+v", got)
				require.Equal(t, "pending", s.reservation(t, adminAuth, ids[i]).State, "nothing confirmed before both arrived")
				got = s.stripe(t, second.id, second.typ, second.object)
				require.Equal(t, p.want, got.Outcome, "%s: %+v", p.who, got)
				require.False(t, got.Replayed)
				sent = append(sent, first, second)
			}
			require.Equal(t, "confirmed", s.reservation(t, adminAuth, ids[0]).State)
			require.Equal(t, "cancelled", s.reservation(t, adminAuth, ids[1]).State)
			require.Equal(t, "confirmed", s.reservation(t, adminAuth, ids[2]).State)
			requireRefund(t, s, ids[1], "instrument_limit")
			require.Equal(t, 1, s.ledger(t, ids[1], "cancel"))

			before := counts(t, s.pool)
			for _, d := range sent {
				got := s.stripe(t, d.id, d.typ, d.object)
				require.True(t, got.Replayed, "%s: %+v", d.id, got)
			}
			require.Equal(t, before, counts(t, s.pool), "a redelivery writes nothing")
			require.Equal(t, 1, s.ledger(t, ids[1], "cancel"))
			got := requireBooksBalance(t, s, sale.SaleID)
			require.Equal(t, []int{2, 1, 3}, []int{got.Confirmed, got.Cancelled, got.Available})
		})
	}
}

// adyenAuthorisation is a notification of one AUTHORISATION item, signed,
// whose additionalData carries the card's alias (when not "").
func adyenAuthorisation(t *testing.T, psp, reservationID, alias string) string {
	t.Helper()
	it := webhook.AdyenItem{PSPReference: psp, MerchantAccountCode: "FlashlineShop", MerchantReference: reservationID,
		Value: 1000, Currency: "EUR", EventCode: "AUTHORISATION", Success: "true"}
	sig, err := webhook.SignAdyen(it, adyenTestKey)
	require.NoError(t, err)
	data := map[string]any{"hmacSignature": sig, "cardSummary": "1111", "aliasType": "Default"}
	if alias != "" {
		data["alias"] = alias
	}
	b, err := json.Marshal(map[string]any{"live": "false", "notificationItems": []any{map[string]any{
		"NotificationRequestItem": map[string]any{
			"additionalData": data, "amount": map[string]any{"value": it.Value, "currency": it.Currency},
			"eventCode": it.EventCode, "eventDate": time.Now().Format(time.RFC3339),
			"merchantAccountCode": it.MerchantAccountCode, "merchantReference": it.MerchantReference,
			"paymentMethod": "visa", "pspReference": it.PSPReference, "success": it.Success,
		},
	}}})
	require.NoError(t, err)
	return string(b)
}

// TestInstrumentLimitThroughAdyen: the same through Adyen's notifications,
// whose item carries the card's alias: one order, one refund, once however
// often Adyen sends it; a payment whose notification names no instrument is
// not counted (docs/payments.md says why that is weaker).
func TestInstrumentLimitThroughAdyen(t *testing.T) {
	t.Parallel()
	s := providerServer(t)
	sale := s.createSale(t, `{"sku":"sku_adyen_card","initialStock":5,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	var ids []string
	for i, alias := range []string{"H167852639363479", "H167852639363479", ""} {
		ids = append(ids, requireCreated(t, s.reserve(t, sale.SaleID, customer(t, fmt.Sprintf("adyen_%d", i)), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID)
		body := adyenAuthorisation(t, fmt.Sprintf("PSP%016d", i), ids[i], alias)
		for range 2 { // sent again: applied once
			r := s.do(t, http.MethodPost, "/payments/adyen", "", body)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			require.Equal(t, "[accepted]", string(r.Body))
		}
	}
	require.Equal(t, "confirmed", s.reservation(t, adminAuth, ids[0]).State)
	require.Equal(t, "cancelled", s.reservation(t, adminAuth, ids[1]).State)
	require.Equal(t, "confirmed", s.reservation(t, adminAuth, ids[2]).State, "no alias: no instrument to count")
	requireRefund(t, s, ids[1], "instrument_limit")
	require.Equal(t, 1, s.ledger(t, ids[1], "cancel"))
	requireBooksBalance(t, s, sale.SaleID)
}

// TestInstrumentLimitConcurrentPayments: the payments of six customers
// with one card, each event delivered twice, all at once (each on its own
// connection, as on as many instances): one order, five refunds, each
// cancelled hold's unit back once.
func TestInstrumentLimitConcurrentPayments(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_race_card","initialStock":10,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = requireCreated(t, s.reserve(t, sale.SaleID, customer(t, fmt.Sprintf("race_%d", i)), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID
	}
	outcomes := make(chan string, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			ev := event(fmt.Sprintf("evt_race_%d", i%n), "payment.succeeded", ids[i%n], fmt.Sprintf("pay_race_%d", i%n))
			ev.Data.PaymentInstrument = "card:fp_one"
			r, err := s.api.SendPaymentEvent(t.Context(), time.Now(), ev, paymentSecret)
			if err == nil && r.Status == http.StatusOK && !r.Value.Replayed {
				outcomes <- r.Value.Outcome
			} else if err != nil || r.Status != http.StatusOK {
				outcomes <- fmt.Sprintf("error %v %d %s", err, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	close(outcomes)
	got := map[string]int{}
	for o := range outcomes {
		got[o]++
	}
	require.Equal(t, map[string]int{"confirmed": 1, "instrument_limit": n - 1}, got)
	cancelled := 0
	for _, id := range ids {
		if s.reservation(t, adminAuth, id).State == "cancelled" {
			cancelled++
			requireRefund(t, s, id, "instrument_limit")
			require.Equal(t, 1, s.ledger(t, id, "cancel"))
		}
	}
	require.Equal(t, n-1, cancelled)
	b := requireBooksBalance(t, s, sale.SaleID)
	require.Equal(t, []int{1, 9}, []int{b.Confirmed, b.Available})
}

// TestBodyInstrumentNoLongerCounts: the instrument a shopper writes in the
// body is ignored (still checked, for older clients); the one the
// customer token names counts at the reservation; a sale limited per
// instrument takes a reservation that names none (its payment counts).
func TestBodyInstrumentNoLongerCounts(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_body_card","initialStock":10,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	// Two accounts claiming one card in the body: neither locks the other
	// out.
	requireCreated(t, s.reserve(t, sale.SaleID, customer(t, "body_a"), "k", `{"quantity":1,"paymentInstrument":"card_x"}`), sale.SaleID, 1)
	requireCreated(t, s.reserve(t, sale.SaleID, customer(t, "body_b"), "k", `{"quantity":1,"paymentInstrument":"card_x"}`), sale.SaleID, 1)
	// None named at all.
	requireCreated(t, s.reserve(t, sale.SaleID, customer(t, "body_c"), "k", `{"quantity":1}`), sale.SaleID, 1)
	// The token's claim counts, whatever the body says.
	requireCreated(t, s.reserve(t, sale.SaleID, customerWith(t, "claim_a", "card_y"), "k", `{"quantity":1,"paymentInstrument":"card_1"}`), sale.SaleID, 1)
	requireError(t, s.reserve(t, sale.SaleID, customerWith(t, "claim_b", "CARD_Y"), "k", `{"quantity":1,"paymentInstrument":"card_2"}`), 409, "limit_reached")
	// A claim that cannot be counted is a token that proves nothing.
	requireError(t, s.reserve(t, sale.SaleID, customerWith(t, "claim_c", "card\u200by"), "k", `{"quantity":1}`), 401, "unauthenticated")
}

// TestInstrumentLimitStripeEventsAtOnce: both customers' PaymentIntent and
// charge events, each delivered twice, all at once (as Stripe's retries to
// several instances may): whatever the order, one order and one refund, the
// refused hold's unit back once, no payment left waiting.
func TestInstrumentLimitStripeEventsAtOnce(t *testing.T) {
	t.Parallel()
	s := providerServer(t)
	sale := s.createSale(t, `{"sku":"sku_card_at_once","initialStock":5,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	ids := make([]string, 2)
	type delivery struct {
		id, typ string
		object  map[string]any
	}
	var all []delivery
	for i := range ids {
		ids[i] = requireCreated(t, s.reserve(t, sale.SaleID, customer(t, fmt.Sprintf("once_%d", i)), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID
		pi := fmt.Sprintf("pi_once_%d", i)
		all = append(all,
			delivery{"evt_pi_" + pi, "payment_intent.succeeded", intentSucceeded(pi, ids[i])},
			delivery{"evt_ch_" + pi, "charge.succeeded", chargeSucceeded(pi, ids[i], "fp_once")})
	}
	var wg sync.WaitGroup
	failures := make(chan string, 2*len(all))
	for range 2 {
		for _, d := range all {
			wg.Go(func() {
				body, _ := json.Marshal(map[string]any{"id": d.id, "object": "event", "type": d.typ,
					"created": time.Now().Unix(), "data": map[string]any{"object": d.object}})
				r, err := s.send(t.Context(), http.MethodPost, "/payments/stripe", "", string(body),
					webhook.StripeHeader, webhook.Sign(time.Now(), body, stripeTestSecret))
				if err != nil || r.Status != http.StatusOK {
					failures <- fmt.Sprintf("%s: %v %d %s", d.id, err, r.Status, r.Body)
				}
			})
		}
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	states := map[string]string{}
	for _, id := range ids {
		states[id] = s.reservation(t, adminAuth, id).State
	}
	confirmed, cancelled := ids[0], ids[1]
	if states[ids[0]] == "cancelled" {
		confirmed, cancelled = ids[1], ids[0]
	}
	require.Equal(t, map[string]string{confirmed: "confirmed", cancelled: "cancelled"}, states)
	requireRefund(t, s, cancelled, "instrument_limit")
	require.Equal(t, 1, s.ledger(t, cancelled, "cancel"))
	var waiting int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM payment_events WHERE outcome = 'awaiting_instrument'`).Scan(&waiting))
	require.Zero(t, waiting, "no payment left waiting for its instrument")
	requireBooksBalance(t, s, sale.SaleID)
}

// TestStripeChargeWithoutFingerprint: a charge whose payment method has no
// fingerprint reports no instrument: the PaymentIntent's success that waited
// for it confirms, counted for no instrument, rather than waiting until its
// hold expires.
func TestStripeChargeWithoutFingerprint(t *testing.T) {
	t.Parallel()
	s := providerServer(t)
	sale := s.createSale(t, `{"sku":"sku_no_fp","initialStock":5,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	id := requireCreated(t, s.reserve(t, sale.SaleID, customer(t, "no_fp"), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID
	require.Equal(t, "awaiting_instrument", s.stripe(t, "evt_pi_nofp", "payment_intent.succeeded", intentSucceeded("pi_nofp", id)).Outcome)
	charge := chargeSucceeded("pi_nofp", id, "")
	charge["payment_method_details"] = map[string]any{"type": "link", "link": map[string]any{"country": "FR"}}
	got := s.stripe(t, "evt_ch_nofp", "charge.succeeded", charge)
	require.Equal(t, "confirmed", got.Outcome, "%+v", got)
	require.Equal(t, "confirmed", s.reservation(t, adminAuth, id).State)
}

// TestInstrumentClaimDisagreesWithProvider: a customer whose token claims
// one card pays with another. The provider's fingerprint wins for the
// limit: the order counts under the card that paid — a second customer
// whose token names that card is refused at the reservation, and one
// naming the claimed card is not — and the disagreement is counted
// (flashline_payment_instrument_mismatches_total), once however often the
// events are delivered.
func TestInstrumentClaimDisagreesWithProvider(t *testing.T) {
	t.Parallel()
	s := providerServer(t)
	sale := s.createSale(t, `{"sku":"sku_claim_mismatch","initialStock":5,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	const mismatches = "flashline_payment_instrument_mismatches_total"
	require.Equal(t, "0", s.metricValue(t, mismatches))

	id := requireCreated(t, s.reserve(t, sale.SaleID, customerWith(t, "claims_a", "card:fp_claimed"), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID
	require.Equal(t, "awaiting_instrument", s.stripe(t, "evt_pi_mm", "payment_intent.succeeded", intentSucceeded("pi_mm", id)).Outcome)
	got := s.stripe(t, "evt_ch_mm", "charge.succeeded", chargeSucceeded("pi_mm", id, "fp_paid"))
	require.Equal(t, "confirmed", got.Outcome, "%+v", got)
	require.Equal(t, "1", s.metricValue(t, mismatches))
	for _, ev := range []struct {
		id, typ string
		obj     map[string]any
	}{{"evt_pi_mm", "payment_intent.succeeded", intentSucceeded("pi_mm", id)}, {"evt_ch_mm", "charge.succeeded", chargeSucceeded("pi_mm", id, "fp_paid")}} {
		require.True(t, s.stripe(t, ev.id, ev.typ, ev.obj).Replayed)
	}
	require.Equal(t, "1", s.metricValue(t, mismatches), "a redelivery is not counted again")

	// The card that paid has its one unit: a token naming it holds nothing.
	requireError(t, s.reserve(t, sale.SaleID, customerWith(t, "names_paid", "card:fp_paid"), "k", `{"quantity":1}`), http.StatusConflict, "limit_reached")
	// The card only claimed has bought nothing.
	requireCreated(t, s.reserve(t, sale.SaleID, customerWith(t, "names_claimed", "card:fp_claimed"), "k", `{"quantity":1}`), sale.SaleID, 1)
}

// TestStripeChargesThatNeverCome: a Stripe endpoint not subscribed to
// charge.succeeded. A PaymentIntent's success that waits for its charge
// while another of the sale's has waited past the bound
// (flashline.InstrumentReportOverdue; the test ages that one in the
// database) and no charge came meanwhile is counted
// (flashline_instrument_reports_overdue_total) and logged; once a charge
// comes for the sale, a success waiting is not: one charge lost among
// many that arrive is no misconfiguration.
func TestStripeChargesThatNeverCome(t *testing.T) {
	t.Parallel()
	s := providerServer(t)
	sale := s.createSale(t, `{"sku":"sku_no_charges","initialStock":5,"perCustomerLimit":1,"perInstrumentLimit":1}`)
	const overdue = "flashline_instrument_reports_overdue_total"
	intent := func(n int) string {
		t.Helper()
		id := requireCreated(t, s.reserve(t, sale.SaleID, customer(t, fmt.Sprintf("nocharge_%d", n)), "k", `{"quantity":1}`), sale.SaleID, 1).ReservationID
		pi := fmt.Sprintf("pi_nocharge_%d", n)
		require.Equal(t, "awaiting_instrument", s.stripe(t, "evt_"+pi, "payment_intent.succeeded", intentSucceeded(pi, id)).Outcome)
		return id
	}
	intent(0)
	require.Equal(t, "0", s.metricValue(t, overdue))
	tag, err := s.pool.Exec(t.Context(), `UPDATE payment_events SET received_at = now() - interval '10 minutes' WHERE event_id LIKE '%evt_pi_nocharge_0'`)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	second := intent(1)
	require.Equal(t, "1", s.metricValue(t, overdue), "a success waits while another has waited ten minutes with no charge")
	require.True(t, s.stripe(t, "evt_pi_nocharge_1", "payment_intent.succeeded", intentSucceeded("pi_nocharge_1", second)).Replayed)
	require.Equal(t, "1", s.metricValue(t, overdue), "a redelivery is not counted again")

	// A charge comes for the sale: the reports do come.
	require.Equal(t, "confirmed", s.stripe(t, "evt_ch_nocharge_1", "charge.succeeded", chargeSucceeded("pi_nocharge_1", second, "fp_nc")).Outcome)
	intent(2)
	require.Equal(t, "1", s.metricValue(t, overdue))
}
