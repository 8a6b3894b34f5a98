package contract_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/contract"
)

const (
	saleID = "sale_01J8Z3K6Q9V2T7N4W5X8Y0A1B2"
	sale   = `{"saleId":"` + saleID + `","sku":"s","title":"s","imageUrl":null,"state":"open","initialStock":1,"available":1,"pending":0,"confirmed":0,
"expired":0,"cancelled":0,"voided":0,"perCustomerLimit":1,"reservationTtlSeconds":600,"admission":"direct","buckets":1,
"fairness":"randomized_at_open","challengeBits":0,"perInstrumentLimit":null,"minAccountAgeSeconds":0,"confirmation":"payment",
"opensAt":null,"invariant":{"ok":true,"checkedAt":null},"gate":{"kind":"none"},"price":null}`
)

func TestDocumentIs31(t *testing.T) {
	doc, err := contract.Document()
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater(), "openapi: %s", doc.OpenAPI)
	for _, name := range []string{"customerBearer", "adminBearer", "adminSession", "paymentSignature"} {
		require.Contains(t, doc.Components.SecuritySchemes, name)
	}
}

// exchange is one request and answer to check.
type exchange struct {
	method, path, auth, reqBody string
	header                      []string
	status                      int
	respHeader                  []string
	respBody                    string
}

func (x exchange) check(t *testing.T, c *contract.Checker) error {
	t.Helper()
	req := httptest.NewRequest(x.method, x.path, strings.NewReader(x.reqBody))
	if x.auth != "" {
		req.Header.Set("Authorization", "Bearer "+x.auth)
	}
	for i := 0; i+1 < len(x.header); i += 2 {
		req.Header.Add(x.header[i], x.header[i+1])
	}
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	for i := 0; i+1 < len(x.respHeader); i += 2 {
		h.Add(x.respHeader[i], x.respHeader[i+1])
	}
	return c.Check(t.Context(), contract.Exchange{Request: req, RequestBody: []byte(x.reqBody), RequestBodyKnown: true,
		Status: x.status, Header: h, Body: []byte(x.respBody)})
}

// TestCheckerCatchesDrift: the checker passes what the document describes
// and catches each kind of drift between the server and the document.
func TestCheckerCatchesDrift(t *testing.T) {
	c, err := contract.New()
	require.NoError(t, err)
	conflict := func(code string) string { return `{"error":{"code":"` + code + `","message":"m"}}` }
	reserve := "/sales/" + saleID + "/reservations"
	receipt := `{"reservationId":"res_01J8Z3K6Q9V2T7N4W5X8Y0A1B2","saleId":"` + saleID + `","quantity":1,"state":"pending","expiresAt":"2026-01-01T00:00:00Z"}`
	good := map[string]exchange{
		"CreateSale":       {method: "POST", path: "/admin/sales", auth: "a", reqBody: `{"sku":"s","initialStock":1}`, status: 201, respBody: sale},
		"SoldOut":          {method: "POST", path: reserve, auth: "c", reqBody: `{}`, header: []string{"Idempotency-Key", "k"}, status: 409, respBody: conflict("sold_out")},
		"Replayed":         {method: "POST", path: reserve, auth: "c", reqBody: `{"quantity":1}`, header: []string{"Idempotency-Key", "k"}, status: 201, respHeader: []string{"Idempotent-Replayed", "true"}, respBody: receipt},
		"NoKeyRefused":     {method: "POST", path: reserve, auth: "c", reqBody: `{}`, status: 400, respBody: conflict("idempotency_key_missing")},
		"UnknownPath":      {method: "GET", path: "/nothing", status: 404, respBody: conflict("not_found")},
		"WrongMethod":      {method: "DELETE", path: "/healthz", status: 405, respBody: conflict("method_not_allowed")},
		"Overloaded":       {method: "POST", path: reserve, auth: "c", reqBody: `{}`, header: []string{"Idempotency-Key", "k"}, status: 503, respHeader: []string{"Retry-After", "2"}, respBody: conflict("overloaded")},
		"RiverUISubtree":   {method: "GET", path: "/admin/riverui/api/jobs", auth: "a", status: 200, respBody: "anything"},
		"NoCredentials401": {method: "GET", path: "/admin/sales/" + saleID, status: 401, respBody: conflict("unauthenticated")},
	}
	for name, x := range good {
		t.Run(name, func(t *testing.T) { require.NoError(t, x.check(t, c)) })
	}
	bad := map[string]exchange{
		"CodeNotListed":        {method: "POST", path: reserve, auth: "c", reqBody: `{}`, header: []string{"Idempotency-Key", "k"}, status: 409, respBody: conflict("payment_required")},
		"StatusNotListed":      {method: "GET", path: "/healthz", status: 201, respBody: `{"status":"ok"}`},
		"FieldMissing":         {method: "POST", path: "/admin/sales", auth: "a", reqBody: `{"sku":"s","initialStock":1}`, status: 201, respBody: strings.Replace(sale, `"voided":0,`, "", 1)},
		"FieldUndocumented":    {method: "GET", path: "/healthz", status: 200, respBody: `{"status":"ok","extra":1}`},
		"RetryAfterMissing":    {method: "POST", path: reserve, auth: "c", reqBody: `{}`, header: []string{"Idempotency-Key", "k"}, status: 503, respBody: conflict("overloaded")},
		"LaxOnUnknownField":    {method: "POST", path: "/admin/sales", auth: "a", reqBody: `{"sku":"s","initialStock":1,"colour":"red"}`, status: 201, respBody: sale},
		"LaxWithoutKey":        {method: "POST", path: reserve, auth: "c", reqBody: `{}`, status: 201, respBody: receipt},
		"LaxWithoutAuth":       {method: "GET", path: "/admin/payments/late", status: 200, respBody: `{"latePayments":[]}`},
		"UnknownPathAnswered":  {method: "GET", path: "/nothing", status: 200, respBody: `{}`},
		"ErrorNotTheContracts": {method: "GET", path: "/admin/sales/" + saleID, auth: "a", status: 404, respBody: `{"message":"not found"}`},
	}
	for name, x := range bad {
		t.Run(name, func(t *testing.T) {
			err := x.check(t, c)
			require.Error(t, err)
			t.Log(err)
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	c, err := contract.New()
	require.NoError(b, err)
	req := httptest.NewRequest("POST", "/admin/sales", strings.NewReader(`{"sku":"s","initialStock":1}`))
	req.Header.Set("Authorization", "Bearer a")
	x := contract.Exchange{Request: req, RequestBody: []byte(`{"sku":"s","initialStock":1}`), RequestBodyKnown: true,
		Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(sale)}
	for b.Loop() {
		if err := c.Check(b.Context(), x); err != nil {
			b.Fatal(err)
		}
	}
}
