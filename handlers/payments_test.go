package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/webhook"
)

// The day after the click, over HTTP against real PostgreSQL: payment
// events (signed, applied once), late payments, extensions and voids. The
// multi-process proofs (three instances, the sweeper) are in
// cmd/flashline/payments_test.go.

// pay sends ev signed now with the test's payment secret.
func (s *server) pay(t *testing.T, ev client.PaymentEvent) client.Result[client.PaymentResult] {
	t.Helper()
	r, err := s.api.SendPaymentEvent(t.Context(), time.Now(), ev, paymentSecret)
	require.NoError(t, err)
	require.Less(t, r.Status, 500, "%s", r.Body)
	return r
}

func event(id, typ, reservationID, ref string) client.PaymentEvent {
	return client.PaymentEvent{ID: id, Type: typ, Data: client.PaymentData{ReservationID: reservationID, PaymentReference: ref}}
}

func requireOutcome(t *testing.T, r client.Result[client.PaymentResult], outcome string) client.PaymentResult {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, outcome, r.Value.Outcome, "%s", r.Body)
	return r.Value
}

func (s *server) reservation(t *testing.T, who, id string) reservationJSON {
	t.Helper()
	return requireReservation(t, s.do(t, http.MethodGet, "/reservations/"+id, who, ""), http.StatusOK)
}

func (s *server) ledger(t *testing.T, reservationID, reason string) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM stock_ledger WHERE reservation_id = $1 AND reason = $2`, reservationID, reason).Scan(&n))
	return n
}

func (s *server) latePayments(t *testing.T, all bool) []client.LatePayment {
	t.Helper()
	r, err := s.api.LatePayments(t.Context(), adminToken, all)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return r.Value.LatePayments
}

// metricValue reads one sample of /metrics ("name{labels} value").
func (s *server) metricValue(t *testing.T, sample string) string {
	t.Helper()
	r := s.do(t, http.MethodGet, "/metrics", adminAuth, "")
	for line := range strings.Lines(string(r.Body)) {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

func requireBooksBalance(t *testing.T, s *server, saleID string) saleJSON {
	t.Helper()
	sale := s.sale(t, saleID)
	require.True(t, sale.Invariant.OK, "%+v", sale)
	require.Equal(t, sale.InitialStock, sale.Available+sale.Pending+sale.Confirmed, "%+v", sale)
	return sale
}

// TestPaymentConfirmsHold: in a sale confirmed by payment (the default) the
// customer cannot confirm; a signed payment.succeeded does, once, storing
// what paid; a redelivery is a replay; another payment for the same order is
// late (to refund) until its refund arrives; the order's own refund voids
// it and its units come back.
func TestPaymentConfirmsHold(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_pay","initialStock":5,"perCustomerLimit":2}`)
	require.Equal(t, "payment", sale.Confirmation)
	alice := customer(t, "alice")
	res := requireCreated(t, s.reserve(t, sale.SaleID, alice, "k1", `{"quantity":2}`), sale.SaleID, 2)

	t.Run("CustomerCannotConfirm", func(t *testing.T) {
		requireError(t, s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/confirm", alice, ""), 409, "payment_required")
		requireError(t, s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/confirm", adminAuth, ""), 409, "payment_required")
		require.Equal(t, "pending", s.reservation(t, alice, res.ReservationID).State)
	})

	amount := int64(25800)
	first := event("evt_confirm_1", "payment.succeeded", res.ReservationID, "pi_1")
	first.Data.Amount, first.Data.Currency = &amount, "EUR"
	var orderID string
	t.Run("Succeeded", func(t *testing.T) {
		got := requireOutcome(t, s.pay(t, first), "confirmed")
		require.NotEmpty(t, got.OrderID)
		require.Equal(t, "confirmed", got.State)
		require.False(t, got.Replayed)
		orderID = got.OrderID
		r := s.reservation(t, alice, res.ReservationID)
		require.Equal(t, "confirmed", r.State)
		require.Equal(t, orderID, r.OrderID)
		var ref, cur, evt string
		var amt int64
		require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT payment_reference, amount, currency, payment_event_id FROM orders WHERE order_id = $1`, orderID).
			Scan(&ref, &amt, &cur, &evt))
		require.Equal(t, []any{"pi_1", int64(25800), "EUR", "evt_confirm_1"}, []any{ref, amt, cur, evt})
		// Now the customer's confirm answers the order, as before.
		o := s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/confirm", alice, "")
		require.Equal(t, http.StatusOK, o.Status, "%s", o.Body)
		require.Contains(t, string(o.Body), orderID)
		sale := requireBooksBalance(t, s, sale.SaleID)
		require.Equal(t, 2, sale.Confirmed)
	})

	t.Run("Replayed", func(t *testing.T) {
		before := counts(t, s.pool)
		got := requireOutcome(t, s.pay(t, first), "confirmed")
		require.True(t, got.Replayed)
		require.Equal(t, orderID, got.OrderID)
		require.Equal(t, before, counts(t, s.pool), "a replay writes nothing")

		changed := first
		changed.Data.PaymentReference = "pi_other"
		requireError(t, reply(s.pay(t, changed).Response), 422, "event_id_reused")
		require.Equal(t, before, counts(t, s.pool))
	})

	t.Run("SamePaymentAnotherEvent", func(t *testing.T) {
		got := requireOutcome(t, s.pay(t, event("evt_confirm_2", "payment.succeeded", res.ReservationID, "pi_1")), "already_confirmed")
		require.Equal(t, orderID, got.OrderID)
		require.Empty(t, s.latePayments(t, true))
	})

	t.Run("DuplicatePaymentIsLate", func(t *testing.T) {
		requireOutcome(t, s.pay(t, event("evt_confirm_3", "payment.succeeded", res.ReservationID, "pi_2")), "late_payment")
		late := s.latePayments(t, false)
		require.Len(t, late, 1)
		require.Equal(t, "duplicate_payment", late[0].Reason)
		require.Equal(t, "pi_2", late[0].PaymentReference)
		require.Equal(t, sale.SaleID, late[0].SaleID)
		require.Nil(t, late[0].RefundedAt)
		require.Equal(t, "1", s.metricValue(t, "flashline_late_payments_total"))
		require.Equal(t, 2, requireBooksBalance(t, s, sale.SaleID).Confirmed, "no stock taken for it")

		// Its refund closes it, and leaves the order alone.
		requireOutcome(t, s.pay(t, event("evt_refund_dup", "refund.succeeded", res.ReservationID, "pi_2")), "refund_recorded")
		require.Empty(t, s.latePayments(t, false))
		all := s.latePayments(t, true)
		require.Len(t, all, 1)
		require.NotNil(t, all[0].RefundedAt)
		require.Equal(t, "evt_refund_dup", all[0].RefundEventID)
		require.Equal(t, "confirmed", s.reservation(t, alice, res.ReservationID).State)
	})

	t.Run("RefundVoids", func(t *testing.T) {
		got := requireOutcome(t, s.pay(t, event("evt_refund_1", "refund.succeeded", res.ReservationID, "pi_1")), "voided")
		require.Equal(t, orderID, got.OrderID)
		r := s.reservation(t, alice, res.ReservationID)
		require.Equal(t, "voided", r.State)
		require.Equal(t, orderID, r.OrderID, "the voided order keeps its id")
		sale := requireBooksBalance(t, s, sale.SaleID)
		require.Equal(t, []int{5, 0, 0, 2}, []int{sale.Available, sale.Pending, sale.Confirmed, sale.Voided})
		require.Equal(t, 1, s.ledger(t, res.ReservationID, "void"))
		// Refunded again (another event): nothing more comes back.
		requireOutcome(t, s.pay(t, event("evt_refund_2", "refund.succeeded", res.ReservationID, "pi_1")), "no_effect")
		require.Equal(t, 1, s.ledger(t, res.ReservationID, "void"))
		require.Equal(t, 5, s.sale(t, sale.SaleID).Available)
		requireError(t, s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/confirm", alice, ""), 409, "reservation_voided")
		requireError(t, s.do(t, http.MethodPost, "/reservations/"+res.ReservationID+"/cancel", alice, ""), 409, "reservation_voided")
	})

	require.Equal(t, "1", s.metricValue(t, `flashline_payment_events_total{outcome="confirmed",type="payment.succeeded"}`))
	require.Equal(t, "1", s.metricValue(t, `flashline_payment_events_total{outcome="replayed",type="payment.succeeded"}`))
}

// TestPaymentEventRefusals: what is not a signed, well-formed event about a
// known reservation is a clear 4xx and writes nothing.
func TestPaymentEventRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_pay","initialStock":5}`)
	res := requireCreated(t, s.reserve(t, sale.SaleID, customer(t, "alice"), "k1", `{"quantity":1}`), sale.SaleID, 1)
	good := func(resID string) string {
		return fmt.Sprintf(`{"id":"evt_1","type":"payment.succeeded","data":{"reservationId":%q,"paymentReference":"pi_1"}}`, resID)
	}
	body := good(res.ReservationID)
	now := time.Now()
	sign := func(b string) string { return webhook.Sign(now, []byte(b), paymentSecret) }
	before := counts(t, s.pool)
	for _, tt := range []struct {
		name, signature, body string
		status                int
		code                  string
	}{
		{"NoSignature", "", body, 400, "signature_invalid"},
		{"WrongSecret", webhook.Sign(now, []byte(body), "not-the-payment-secret-0123456789ab"), body, 400, "signature_invalid"},
		{"BodyChangedAfterSigning", sign(body), strings.Replace(body, "pi_1", "pi_9", 1), 400, "signature_invalid"},
		{"Malformed", "t=abc,v1=00", body, 400, "signature_invalid"},
		{"Stale", webhook.Sign(now.Add(-6*time.Minute), []byte(body), paymentSecret), body, 400, "signature_expired"},
		{"FromTheFuture", webhook.Sign(now.Add(6*time.Minute), []byte(body), paymentSecret), body, 400, "signature_expired"},
		{"UnknownReservation", sign(good("res_01ARZ3NDEKTSV4RRFFQ69G5FAV")), good("res_01ARZ3NDEKTSV4RRFFQ69G5FAV"), 422, "unknown_reservation"},
		{"NotAReservationID", sign(good("res_nope")), good("res_nope"), 422, "unknown_reservation"},
		{"NotJSON", sign(`evt`), `evt`, 400, "invalid_request"},
		{"UnknownType", sign(strings.Replace(body, "payment.succeeded", "charge.dispute", 1)), strings.Replace(body, "payment.succeeded", "charge.dispute", 1), 400, "invalid_request"},
		{"UnknownField", sign(`{"id":"evt_1","type":"payment.succeeded","data":{},"extra":1}`), `{"id":"evt_1","type":"payment.succeeded","data":{},"extra":1}`, 400, "invalid_request"},
		{"UnknownDataField", sign(strings.Replace(body, `"pi_1"`, `"pi_1","card":"4242"`, 1)), strings.Replace(body, `"pi_1"`, `"pi_1","card":"4242"`, 1), 400, "invalid_request"},
		{"NoData", sign(`{"id":"evt_1","type":"payment.succeeded"}`), `{"id":"evt_1","type":"payment.succeeded"}`, 400, "invalid_request"},
		{"NoReference", sign(strings.Replace(body, `,"paymentReference":"pi_1"`, ``, 1)), strings.Replace(body, `,"paymentReference":"pi_1"`, ``, 1), 400, "invalid_request"},
		{"NegativeAmount", sign(strings.Replace(body, `"pi_1"`, `"pi_1","amount":-1`, 1)), strings.Replace(body, `"pi_1"`, `"pi_1","amount":-1`, 1), 400, "invalid_request"},
		{"BadCurrency", sign(strings.Replace(body, `"pi_1"`, `"pi_1","currency":"EURO"`, 1)), strings.Replace(body, `"pi_1"`, `"pi_1","currency":"EURO"`, 1), 400, "invalid_request"},
		{"IDWithSpace", sign(strings.Replace(body, `"evt_1"`, `"evt 1"`, 1)), strings.Replace(body, `"evt_1"`, `"evt 1"`, 1), 400, "invalid_request"},
		{"NoID", sign(strings.Replace(body, `"id":"evt_1",`, ``, 1)), strings.Replace(body, `"id":"evt_1",`, ``, 1), 400, "invalid_request"},
		{"TooLarge", sign(padTo(body, handlers.MaxPaymentEventBytes+1)), padTo(body, handlers.MaxPaymentEventBytes+1), 400, "invalid_request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.api.SendPaymentEventBody(t.Context(), tt.signature, []byte(tt.body))
			require.NoError(t, err)
			requireError(t, r.Response, tt.status, tt.code)
		})
	}
	require.Equal(t, before, counts(t, s.pool), "a refused event writes nothing")
	require.Equal(t, "pending", s.reservation(t, adminAuth, res.ReservationID).State)

	t.Run("RotationEitherSecretSigns", func(t *testing.T) {
		r, err := s.api.SendPaymentEventBody(t.Context(),
			webhook.Sign(now, []byte(body), "the-old-secret-being-rotated-out-012", paymentSecret), []byte(body))
		require.NoError(t, err)
		requireOutcome(t, r, "confirmed")
	})
}

// TestPaymentFailedAndLate: a failed payment cancels the hold and its units
// come back once; a payment that arrives after the hold ended takes no
// stock and is recorded to refund.
func TestPaymentFailedAndLate(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	sale := s.createSale(t, `{"sku":"sku_pay","initialStock":4,"reservationTtlSeconds":1}`)
	alice, bob := customer(t, "alice"), customer(t, "bob")
	a := requireCreated(t, s.reserve(t, sale.SaleID, alice, "k1", `{"quantity":1}`), sale.SaleID, 1)
	b := requireCreated(t, s.reserve(t, sale.SaleID, bob, "k1", `{"quantity":1}`), sale.SaleID, 1)

	t.Run("FailedCancelsOnce", func(t *testing.T) {
		got := requireOutcome(t, s.pay(t, client.PaymentEvent{ID: "evt_fail_1", Type: "payment.failed",
			Data: client.PaymentData{ReservationID: a.ReservationID, Reason: "card declined"}}), "cancelled")
		require.Equal(t, "cancelled", got.State)
		requireOutcome(t, s.pay(t, event("evt_fail_2", "payment.failed", a.ReservationID, "")), "no_effect")
		require.Equal(t, 1, s.ledger(t, a.ReservationID, "cancel"))
		require.Equal(t, 3, requireBooksBalance(t, s, sale.SaleID).Available)
		// The customer paid after all: the hold is gone, the money goes back.
		requireOutcome(t, s.pay(t, event("evt_late_1", "payment.succeeded", a.ReservationID, "pi_a")), "late_payment")
	})

	t.Run("AfterExpiryNoStockTaken", func(t *testing.T) {
		time.Sleep(1200 * time.Millisecond) // bob's second is up; no sweep has run
		requireOutcome(t, s.pay(t, event("evt_late_2", "payment.succeeded", b.ReservationID, "pi_b")), "late_payment")
		require.Equal(t, "pending", s.reservation(t, bob, b.ReservationID).State, "not confirmed, not yet swept")
		expired, err := store.ExpireDue(t.Context(), 100)
		require.NoError(t, err)
		require.Len(t, expired, 1)
		sale := requireBooksBalance(t, s, sale.SaleID)
		require.Equal(t, []int{4, 0, 0}, []int{sale.Available, sale.Pending, sale.Confirmed})
		// After the sweep, the same: late.
		requireOutcome(t, s.pay(t, event("evt_late_3", "payment.succeeded", b.ReservationID, "pi_b2")), "late_payment")
		var orders int
		require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM orders`).Scan(&orders))
		require.Zero(t, orders)
	})

	late := s.latePayments(t, false)
	reasons := map[string]string{}
	for _, l := range late {
		reasons[l.PaymentReference] = l.Reason
	}
	require.Equal(t, map[string]string{"pi_a": "hold_cancelled", "pi_b": "hold_expired", "pi_b2": "hold_expired"}, reasons)
	require.Equal(t, "3", s.metricValue(t, "flashline_late_payments_total"))
}

// TestPaymentsNotConfigured: an instance without the payment secret takes no
// payment events and refuses to create sales that need them.
func TestPaymentsNotConfigured(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil, func(d *handlers.Deps) { d.Payments = nil })
	requireError(t, s.do(t, http.MethodPost, "/admin/sales", adminAuth, `{"sku":"sku_pay","initialStock":5}`), 409, "payments_not_configured")
	requireError(t, s.do(t, http.MethodPost, "/admin/sales", adminAuth, `{"sku":"sku_pay","initialStock":5,"confirmation":"payment"}`), 409, "payments_not_configured")
	sale := s.createSale(t, `{"sku":"sku_pay","initialStock":5,"confirmation":"customer"}`)
	require.Equal(t, "customer", sale.Confirmation)
	requireError(t, s.do(t, http.MethodPost, "/admin/sales", adminAuth, `{"sku":"sku_pay","initialStock":5,"confirmation":"cash"}`), 400, "invalid_request")
	r, err := s.api.SendPaymentEvent(t.Context(), time.Now(), event("evt_1", "payment.succeeded", "res_01ARZ3NDEKTSV4RRFFQ69G5FAV", "pi"), paymentSecret)
	require.NoError(t, err)
	requireError(t, r.Response, 409, "payments_not_configured")
}

// TestExtendHolds: an admin extends every pending hold of a sale whose time
// is not up (bounded, audited), or one hold; a hold confirmed inside its new
// window becomes an order.
func TestExtendHolds(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_ext","initialStock":10,"reservationTtlSeconds":6,"confirmation":"customer"}`)
	alice, bob, carol := customer(t, "alice"), customer(t, "bob"), customer(t, "carol")
	a := requireCreated(t, s.reserve(t, sale.SaleID, alice, "k1", `{"quantity":1}`), sale.SaleID, 1)
	b := requireCreated(t, s.reserve(t, sale.SaleID, bob, "k1", `{"quantity":1}`), sale.SaleID, 1)
	extend := func(path, body string) reply {
		return s.do(t, http.MethodPost, path, adminAuth, body)
	}

	// The extension comes right after the two holds, inside their 6 s: the
	// bad-input checks, a score of requests that a busy machine can stretch
	// past a hold's time, come last and need no live hold (the body is
	// judged first).
	t.Run("SaleThenConfirmInNewWindow", func(t *testing.T) {
		r := extend("/admin/sales/"+sale.SaleID+"/extend", `{"seconds":30,"operator":"ops-ana"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var v client.Extended
		require.NoError(t, json.Unmarshal(r.Body, &v))
		require.Equal(t, client.Extended{SaleID: sale.SaleID, Seconds: 30, Extended: 2}, v)
		before, err := time.Parse(time.RFC3339, a.ExpiresAt)
		require.NoError(t, err)
		after, err := time.Parse(time.RFC3339, s.reservation(t, alice, a.ReservationID).ExpiresAt)
		require.NoError(t, err)
		require.Equal(t, 30*time.Second, after.Sub(before))

		time.Sleep(time.Until(before.Add(1200 * time.Millisecond))) // past the original time (whole seconds)
		o := s.do(t, http.MethodPost, "/reservations/"+a.ReservationID+"/confirm", alice, "")
		require.Equal(t, http.StatusOK, o.Status, "confirmed inside the new window: %s", o.Body)
		var op string
		var affected int
		require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT operator, affected FROM operator_actions WHERE action = 'extend_sale' AND sale_id = $1`, sale.SaleID).Scan(&op, &affected))
		require.Equal(t, "ops-ana", op)
		require.Equal(t, 2, affected)
	})

	t.Run("PastTheirTimeNotRevived", func(t *testing.T) {
		c := requireCreated(t, s.reserve(t, sale.SaleID, carol, "k1", `{"quantity":1}`), sale.SaleID, 1)
		cExpires, err := time.Parse(time.RFC3339, c.ExpiresAt)
		require.NoError(t, err)
		time.Sleep(time.Until(cExpires.Add(1200 * time.Millisecond))) // carol's hold is up, unswept
		r := extend("/admin/sales/"+sale.SaleID+"/extend", `{"seconds":30}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Contains(t, string(r.Body), `"extended":1`, "bob only: alice is confirmed, carol's time is up")
		requireError(t, extend("/admin/reservations/"+c.ReservationID+"/extend", `{"seconds":30}`), 409, "reservation_expired")
		requireError(t, extend("/admin/reservations/"+a.ReservationID+"/extend", `{"seconds":30}`), 409, "reservation_confirmed")
	})

	t.Run("OneHoldUpToADay", func(t *testing.T) {
		r := requireReservation(t, extend("/admin/reservations/"+b.ReservationID+"/extend", `{"seconds":60}`), http.StatusOK)
		require.Equal(t, "pending", r.State)
		n := 0
		for {
			r := extend("/admin/reservations/"+b.ReservationID+"/extend", `{"seconds":3600}`)
			if r.Status != http.StatusOK {
				requireError(t, r, 409, "extension_limit_reached")
				break
			}
			n++
			require.Less(t, n, 30)
		}
		var total int
		require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT extended_seconds FROM reservations WHERE reservation_id = $1`, b.ReservationID).Scan(&total))
		require.Equal(t, 86400, total, "a day over its original time, no more")
		requireBooksBalance(t, s, sale.SaleID)
	})
	t.Run("BadInput", func(t *testing.T) {
		before := counts(t, s.pool)
		for _, body := range []string{`{}`, `{"seconds":0}`, `{"seconds":-5}`, `{"seconds":3601}`, `{"seconds":"30"}`,
			`{"seconds":30,"operator":"` + strings.Repeat("o", 129) + `"}`, `{"seconds":30,"operator":"a\u0000b"}`, `{"seconds":30,"until":"later"}`} {
			requireError(t, extend("/admin/sales/"+sale.SaleID+"/extend", body), 400, "invalid_request")
			requireError(t, extend("/admin/reservations/"+a.ReservationID+"/extend", body), 400, "invalid_request")
		}
		requireError(t, extend("/admin/sales/sale_01ARZ3NDEKTSV4RRFFQ69G5FAV/extend", `{"seconds":30}`), 404, "not_found")
		requireError(t, extend("/admin/sales/nope/extend", `{"seconds":30}`), 404, "not_found")
		requireError(t, extend("/admin/reservations/res_01ARZ3NDEKTSV4RRFFQ69G5FAV/extend", `{"seconds":30}`), 404, "not_found")
		requireError(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/extend", alice, `{"seconds":30}`), 403, "forbidden")
		require.Equal(t, before, counts(t, s.pool))
	})
}

// TestVoid: an admin voids a confirmed order (its units back once, a 'void'
// ledger row naming the operator, audited), one or a list; voiding again
// changes nothing.
func TestVoid(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_void","initialStock":10,"perCustomerLimit":2,"confirmation":"customer"}`)
	held := map[string]reservationJSON{}
	for _, who := range []string{"alice", "bob", "carol", "dave"} {
		held[who] = requireCreated(t, s.reserve(t, sale.SaleID, customer(t, who), "k1", `{"quantity":2}`), sale.SaleID, 2)
		if who != "bob" {
			o := s.do(t, http.MethodPost, "/reservations/"+held[who].ReservationID+"/confirm", customer(t, who), "")
			require.Equal(t, http.StatusOK, o.Status, "%s", o.Body)
		}
	}
	void := func(id, body string) reply {
		return s.do(t, http.MethodPost, "/admin/reservations/"+id+"/void", adminAuth, body)
	}
	alice := held["alice"].ReservationID

	t.Run("BadInput", func(t *testing.T) {
		before := counts(t, s.pool)
		for _, body := range []string{`{}`, `{"reason":""}`, `{"reason":"` + strings.Repeat("r", 501) + `"}`, `{"reason":"x\u200by"}`,
			`{"reason":"bot","operator":"` + strings.Repeat("o", 129) + `"}`, `{"reason":"bot","why":1}`} {
			requireError(t, void(alice, body), 400, "invalid_request")
		}
		requireError(t, s.do(t, http.MethodPost, "/admin/reservations/"+alice+"/void", customer(t, "alice"), `{"reason":"x"}`), 403, "forbidden")
		requireError(t, void("res_01ARZ3NDEKTSV4RRFFQ69G5FAV", `{"reason":"bot"}`), 404, "not_found")
		require.Equal(t, before, counts(t, s.pool))
	})

	t.Run("One", func(t *testing.T) {
		r := requireReservation(t, void(alice, `{"reason":"automation pattern","operator":"ops-ana"}`), http.StatusOK)
		require.Equal(t, "voided", r.State)
		require.NotEmpty(t, r.OrderID)
		require.Equal(t, "voided", s.reservation(t, customer(t, "alice"), alice).State, "the owner sees it voided")
		var op, note string
		require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT operator, note FROM stock_ledger WHERE reservation_id = $1 AND reason = 'void'`, alice).Scan(&op, &note))
		require.Equal(t, []string{"ops-ana", "automation pattern"}, []string{op, note})
		sale := requireBooksBalance(t, s, sale.SaleID)
		require.Equal(t, []int{4, 2, 4, 2}, []int{sale.Available, sale.Pending, sale.Confirmed, sale.Voided})

		before := counts(t, s.pool)
		require.Equal(t, "voided", requireReservation(t, void(alice, `{"reason":"again"}`), http.StatusOK).State)
		require.Equal(t, before, counts(t, s.pool), "voiding again changes nothing")
		requireError(t, void(held["bob"].ReservationID, `{"reason":"bot"}`), 409, "reservation_not_confirmed")
	})

	t.Run("Bulk", func(t *testing.T) {
		ids := []string{held["carol"].ReservationID, held["dave"].ReservationID, held["bob"].ReservationID, alice,
			"res_bad", "res_01ARZ3NDEKTSV4RRFFQ69G5FAV", held["carol"].ReservationID}
		r, err := s.api.VoidMany(t.Context(), adminToken, ids, "refund batch 7", "ops-ben")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Len(t, r.Value.Results, len(ids))
		codes := make([]string, len(ids))
		for i, res := range r.Value.Results {
			require.Equal(t, ids[i], res.ReservationID)
			if res.Error != nil {
				codes[i] = res.Error.Code
			} else {
				codes[i] = res.State
			}
		}
		require.Equal(t, []string{"voided", "voided", "reservation_not_confirmed", "voided", "not_found", "not_found", "voided"}, codes)
		require.Equal(t, 4, r.Value.Voided)
		sale := requireBooksBalance(t, s, sale.SaleID)
		require.Equal(t, []int{8, 2, 0, 6}, []int{sale.Available, sale.Pending, sale.Confirmed, sale.Voided})
		for _, who := range []string{"alice", "carol", "dave"} {
			require.Equal(t, 1, s.ledger(t, held[who].ReservationID, "void"), who)
		}

		for _, body := range []string{`{"reservationIds":[],"reason":"x"}`, `{"reason":"x"}`,
			`{"reservationIds":["` + strings.Repeat(`res_01ARZ3NDEKTSV4RRFFQ69G5FAV","`, 1000) + `res_01ARZ3NDEKTSV4RRFFQ69G5FAV"],"reason":"x"}`} {
			requireError(t, s.do(t, http.MethodPost, "/admin/reservations/void", adminAuth, body), 400, "invalid_request")
		}
	})
}

// TestVoidTwiceConcurrently: twenty voids and five refunds of one order at
// once, in-process: the order is voided once and its units come back once.
// (cmd/flashline's TestVoidAcrossInstances does it across processes.)
func TestVoidTwiceConcurrently(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sale := s.createSale(t, `{"sku":"sku_void","initialStock":3,"perCustomerLimit":2}`)
	res := requireCreated(t, s.reserve(t, sale.SaleID, customer(t, "alice"), "k1", `{"quantity":2}`), sale.SaleID, 2)
	requireOutcome(t, s.pay(t, event("evt_pay", "payment.succeeded", res.ReservationID, "pi_1")), "confirmed")

	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan string, 25)
	outcomes := make(chan string, 5)
	for i := range 20 {
		wg.Go(func() {
			<-start
			r, err := s.api.Void(context.Background(), adminToken, res.ReservationID, fmt.Sprintf("void %d", i), "")
			if err != nil || r.Status != http.StatusOK || r.Value.State != "voided" {
				errs <- fmt.Sprintf("void %d: %v %d %s", i, err, r.Status, r.Body)
			}
		})
	}
	for i := range 5 {
		wg.Go(func() {
			<-start
			r, err := s.api.SendPaymentEvent(context.Background(), time.Now(), event(fmt.Sprintf("evt_refund_%d", i), "refund.succeeded", res.ReservationID, "pi_1"), paymentSecret)
			if err != nil || r.Status != http.StatusOK {
				errs <- fmt.Sprintf("refund %d: %v %d %s", i, err, r.Status, r.Body)
				return
			}
			outcomes <- r.Value.Outcome
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	close(outcomes)
	for e := range errs {
		t.Error(e)
	}
	voidedByRefund := 0
	for o := range outcomes {
		require.Contains(t, []string{"voided", "no_effect"}, o)
		if o == "voided" {
			voidedByRefund++
		}
	}
	require.LessOrEqual(t, voidedByRefund, 1)
	require.Equal(t, 1, s.ledger(t, res.ReservationID, "void"), "one void ledger row")
	sale = requireBooksBalance(t, s, sale.SaleID)
	require.Equal(t, []int{3, 0, 2}, []int{sale.Available, sale.Confirmed, sale.Voided})
	var actions int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM operator_actions WHERE action = 'void'`).Scan(&actions))
	require.Equal(t, 1, actions, "one audit row: the void that happened")
}
