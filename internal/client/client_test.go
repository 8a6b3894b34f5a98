package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/webhook"
)

// seen is what the fake service received.
type seen struct {
	method, uri, body string
	header            http.Header
}

// fake answers every request with status, header and body, and records it.
func fake(t *testing.T, status int, header map[string]string, body string) (*client.Client, *seen) {
	t.Helper()
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{method: r.Method, uri: r.RequestURI, body: string(b), header: r.Header.Clone()}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return client.New(srv.URL+"/", srv.Client()), &got
}

func TestDo(t *testing.T) {
	t.Parallel()
	c, got := fake(t, http.StatusTeapot, map[string]string{"X-Out": "1"}, "raw\x00bytes")
	r, err := c.Do(context.Background(), client.Request{
		Method: http.MethodPost, Path: "/any/path?q=1", Token: "tok", Body: `{"a":1}`,
		Header: []string{"Idempotency-Key", "k1", "Idempotency-Key", "k2", "Authorization", "Basic x"},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusTeapot, r.Status)
	require.Equal(t, "1", r.Header.Get("X-Out"))
	require.Equal(t, []byte("raw\x00bytes"), r.Body)
	require.Equal(t, "POST", got.method)
	require.Equal(t, "/any/path?q=1", got.uri)
	require.Equal(t, `{"a":1}`, got.body)
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, []string{"k1", "k2"}, got.header.Values("Idempotency-Key"), "headers are added, not set")
	require.Equal(t, []string{"Bearer tok", "Basic x"}, got.header.Values("Authorization"))
	require.Empty(t, r.Code(), "not an error body")

	t.Run("NoTokenNoBody", func(t *testing.T) {
		c, got := fake(t, http.StatusOK, nil, "")
		_, err := c.Do(context.Background(), client.Request{Method: http.MethodGet, Path: "/healthz"})
		require.NoError(t, err)
		require.Empty(t, got.header.Values("Authorization"))
		require.Empty(t, got.header.Values("Content-Type"))
	})
	t.Run("TransportFailure", func(t *testing.T) {
		_, err := client.New("http://127.0.0.1:1", nil).Do(context.Background(), client.Request{Path: "/healthz"})
		require.Error(t, err)
	})
}

func TestReserve(t *testing.T) {
	t.Parallel()
	created := `{"reservationId":"res_1","saleId":"sale_1","quantity":2,"state":"pending","expiresAt":"2030-01-02T03:04:05Z"}`
	c, got := fake(t, http.StatusCreated, map[string]string{"Idempotent-Replayed": "true"}, created)
	r, err := c.Reserve(context.Background(), "tok", client.ReserveRequest{
		SaleID: "sale_1", IdempotencyKey: "k", Quantity: 2, PaymentInstrument: "card-1", AdmissionToken: "adm",
	})
	require.NoError(t, err)
	require.Equal(t, "/sales/sale_1/reservations", got.uri)
	require.JSONEq(t, `{"quantity":2,"paymentInstrument":"card-1"}`, got.body)
	require.Equal(t, "k", got.header.Get("Idempotency-Key"))
	require.Equal(t, "adm", got.header.Get("X-Admission-Token"))
	require.Equal(t, "Bearer tok", got.header.Get("Authorization"))
	require.Equal(t, http.StatusCreated, r.Status)
	require.True(t, r.Replayed())
	require.Equal(t, created, string(r.Body), "the raw body, byte for byte")
	require.Equal(t, "res_1", r.Value.ReservationID)
	require.Equal(t, 2, r.Value.Quantity)
	require.Equal(t, 2030, client.Time(r.Value.ExpiresAt).Year())

	t.Run("WithoutOptionalFields", func(t *testing.T) {
		c, got := fake(t, http.StatusCreated, nil, created)
		_, err := c.Reserve(context.Background(), "tok", client.ReserveRequest{SaleID: "sale_1", Quantity: 1})
		require.NoError(t, err)
		require.Equal(t, `{"quantity":1}`, got.body)
		require.Empty(t, got.header.Values("Idempotency-Key"))
		require.Empty(t, got.header.Values("X-Admission-Token"))
	})
}

func TestContractErrorIsAValue(t *testing.T) {
	t.Parallel()
	c, _ := fake(t, http.StatusServiceUnavailable, map[string]string{"Retry-After": "2"},
		`{"error":{"code":"overloaded","message":"try again"}}`)
	r, err := c.Reserve(context.Background(), "tok", client.ReserveRequest{SaleID: "sale_1", IdempotencyKey: "k", Quantity: 1})
	require.NoError(t, err, "an answer of the contract is not a Go error")
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.Equal(t, "overloaded", r.Code())
	require.Equal(t, client.ErrorBody{Code: "overloaded", Message: "try again"}, r.ErrorBody())
	require.Equal(t, "2", r.RetryAfter())
	require.Empty(t, r.Value.ReservationID)
}

func TestSuccessNotTheContract(t *testing.T) {
	t.Parallel()
	c, _ := fake(t, http.StatusOK, nil, `<html>`)
	r, err := c.Sale(context.Background(), "admin", "sale_1")
	require.Error(t, err)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "<html>", string(r.Body))
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name, method, uri, token, body string
		call                           func(*client.Client) error
	}{
		{"CreateSale", "POST", "/admin/sales", "adm", `{"sku":"s","initialStock":5,"buckets":2}`, func(c *client.Client) error {
			_, err := c.CreateSale(ctx, "adm", client.NewSale{SKU: "s", InitialStock: 5, Buckets: 2})
			return err
		}},
		{"CreateSaleJSON", "POST", "/admin/sales", "adm", `{"raw":true}`, func(c *client.Client) error {
			_, err := c.CreateSaleJSON(ctx, "adm", `{"raw":true}`)
			return err
		}},
		{"Sale", "GET", "/admin/sales/sale_1", "adm", "", func(c *client.Client) error { _, err := c.Sale(ctx, "adm", "sale_1"); return err }},
		{"Open", "POST", "/admin/sales/sale_1/open", "adm", "", func(c *client.Client) error { _, err := c.OpenSale(ctx, "adm", "sale_1"); return err }},
		{"Pause", "POST", "/admin/sales/sale_1/pause", "adm", "", func(c *client.Client) error { _, err := c.PauseSale(ctx, "adm", "sale_1"); return err }},
		{"Resume", "POST", "/admin/sales/sale_1/resume", "adm", "", func(c *client.Client) error { _, err := c.ResumeSale(ctx, "adm", "sale_1"); return err }},
		{"Close", "POST", "/admin/sales/sale_1/close", "adm", "", func(c *client.Client) error { _, err := c.CloseSale(ctx, "adm", "sale_1"); return err }},
		{"Reservation", "GET", "/reservations/res_1", "tok", "", func(c *client.Client) error { _, err := c.Reservation(ctx, "tok", "res_1"); return err }},
		{"Confirm", "POST", "/reservations/res_1/confirm", "tok", "", func(c *client.Client) error { _, err := c.Confirm(ctx, "tok", "res_1"); return err }},
		{"Cancel", "POST", "/reservations/res_1/cancel", "tok", "", func(c *client.Client) error { _, err := c.Cancel(ctx, "tok", "res_1"); return err }},
		{"Ticket", "GET", "/sales/sale_1/ticket", "tok", "", func(c *client.Client) error { _, err := c.Ticket(ctx, "tok", "sale_1", ""); return err }},
		{"TicketHeld", "GET", "/sales/sale_1/ticket?token=t+1", "tok", "", func(c *client.Client) error { _, err := c.Ticket(ctx, "tok", "sale_1", "t 1"); return err }},
		{"Status", "GET", "/sales/sale_1/status?solution=42&token=t1", "tok", "", func(c *client.Client) error {
			_, err := c.Status(ctx, "tok", "sale_1", "t1", "42")
			return err
		}},
		{"Policy", "GET", "/sales/sale_1/policy", "", "", func(c *client.Client) error { _, err := c.Policy(ctx, "sale_1"); return err }},
		{"Healthz", "GET", "/healthz", "", "", func(c *client.Client) error { _, err := c.Healthz(ctx); return err }},
		{"Readyz", "GET", "/readyz", "", "", func(c *client.Client) error { _, err := c.Readyz(ctx); return err }},
		{"Metrics", "GET", "/metrics", "adm", "", func(c *client.Client) error { _, err := c.Metrics(ctx, "adm"); return err }},
		{"IDsEscaped", "GET", "/reservations/a%2Fb", "tok", "", func(c *client.Client) error { _, err := c.Reservation(ctx, "tok", "a/b"); return err }},
		{"ExtendSale", "POST", "/admin/sales/sale_1/extend", "adm", `{"seconds":60,"operator":"ana"}`, func(c *client.Client) error {
			_, err := c.ExtendSale(ctx, "adm", "sale_1", 60, "ana")
			return err
		}},
		{"ExtendReservation", "POST", "/admin/reservations/res_1/extend", "adm", `{"seconds":60}`, func(c *client.Client) error {
			_, err := c.ExtendReservation(ctx, "adm", "res_1", 60, "")
			return err
		}},
		{"Void", "POST", "/admin/reservations/res_1/void", "adm", `{"reason":"bot"}`, func(c *client.Client) error {
			_, err := c.Void(ctx, "adm", "res_1", "bot", "")
			return err
		}},
		{"VoidMany", "POST", "/admin/reservations/void", "adm", `{"reservationIds":["res_1","res_2"],"reason":"bot","operator":"ana"}`, func(c *client.Client) error {
			_, err := c.VoidMany(ctx, "adm", []string{"res_1", "res_2"}, "bot", "ana")
			return err
		}},
		{"Sales", "GET", "/admin/sales?after=sale_1&limit=10&state=open&state=paused", "adm", "", func(c *client.Client) error {
			_, err := c.Sales(ctx, "adm", client.SalePage{States: []string{"open", "paused"}, Limit: 10, After: "sale_1"})
			return err
		}},
		{"LatePayments", "GET", "/admin/payments/late?all=true", "adm", "", func(c *client.Client) error { _, err := c.LatePayments(ctx, "adm", true); return err }},
		{"PaymentEvent", "POST", "/payments/events", "", `{"id":"evt_1","type":"payment.succeeded","data":{"reservationId":"res_1","paymentReference":"pi_1"}}`, func(c *client.Client) error {
			_, err := c.SendPaymentEvent(ctx, time.Now(), client.PaymentEvent{ID: "evt_1", Type: "payment.succeeded",
				Data: client.PaymentData{ReservationID: "res_1", PaymentReference: "pi_1"}}, "secret")
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, got := fake(t, http.StatusOK, nil, `{}`)
			require.NoError(t, tt.call(c))
			require.Equal(t, tt.method, got.method)
			require.Equal(t, tt.uri, got.uri)
			if tt.token == "" {
				require.Empty(t, got.header.Values("Authorization"))
			} else {
				require.Equal(t, "Bearer "+tt.token, got.header.Get("Authorization"))
			}
			if tt.body == "" {
				require.Empty(t, got.body)
			} else {
				require.JSONEq(t, tt.body, got.body)
			}
		})
	}
}

func TestTypedAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := fake(t, http.StatusOK, nil, `{"state":"challenge_required","challenge":{"nonce":"n","bits":8}}`)
	st, err := c.Status(ctx, "tok", "sale_1", "t", "")
	require.NoError(t, err)
	require.Equal(t, "challenge_required", st.Value.State)
	require.Equal(t, &client.Challenge{Nonce: "n", Bits: 8}, st.Value.Challenge)

	c, _ = fake(t, http.StatusOK, nil, `{"saleId":"sale_1","state":"open","initialStock":5,"perInstrumentLimit":null,"opensAt":"2030-01-02T03:04:05Z","invariant":{"ok":true,"checkedAt":null}}`)
	s, err := c.Sale(ctx, "adm", "sale_1")
	require.NoError(t, err)
	require.Equal(t, "sale_1", s.Value.SaleID)
	require.Equal(t, 5, s.Value.InitialStock)
	require.Nil(t, s.Value.PerInstrumentLimit)
	require.Equal(t, 2030, client.TimeOf(s.Value.OpensAt).Year())
	require.True(t, s.Value.Invariant.OK)
	require.Nil(t, s.Value.Invariant.CheckedAt)

	c, _ = fake(t, http.StatusOK, nil, `{"orderId":"ord_1","reservationId":"res_1"}`)
	o, err := c.Confirm(ctx, "tok", "res_1")
	require.NoError(t, err)
	require.Equal(t, client.Order{OrderID: "ord_1", ReservationID: "res_1"}, o.Value)
}

func TestPaymentEventSigned(t *testing.T) {
	t.Parallel()
	c, got := fake(t, http.StatusOK, nil, `{"outcome":"confirmed"}`)
	at := time.Unix(1_800_000_000, 0)
	ev := client.PaymentEvent{ID: "evt_1", Type: "payment.failed", Data: client.PaymentData{ReservationID: "res_1"}}
	r, err := c.SendPaymentEvent(context.Background(), at, ev, "s1", "s2")
	require.NoError(t, err)
	require.Equal(t, "confirmed", r.Value.Outcome)
	require.Equal(t, webhook.Sign(at, []byte(got.body), "s1", "s2"), got.header.Get(webhook.Header), "signed with both, over the bytes sent")
}
