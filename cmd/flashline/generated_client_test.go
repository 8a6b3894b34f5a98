package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/apiclient"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestGeneratedClient: the client oapi-codegen generates from the OpenAPI
// document (internal/apiclient) buys from a running `flashline serve`: a
// sale, a reservation and its replay, the order, a cancelled hold, a sold-out
// refusal with its typed code, the admin's counts. Every exchange is checked
// against the document too.
func TestGeneratedClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flashline serve process: not in -short")
	}
	t.Parallel()
	srv := testserver.Start(t, testdb.New(t))
	api, err := apiclient.NewClientWithResponses(srv.URL,
		apiclient.WithHTTPClient(&http.Client{Transport: srv.Checked(nil), Timeout: 30 * time.Second}))
	require.NoError(t, err)
	ctx := t.Context()
	as := func(token string) apiclient.RequestEditorFn {
		return func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}
	}
	admin := as(testserver.AdminToken)

	customer := apiclient.NewSaleConfirmationCustomer
	created, err := api.CreateSaleWithResponse(ctx, apiclient.NewSale{Sku: "generated", InitialStock: new(2), Confirmation: &customer}, admin)
	require.NoError(t, err)
	require.NotNil(t, created.JSON201, "%d %s", created.StatusCode(), created.Body)
	sale := created.JSON201.SaleId
	require.Equal(t, apiclient.SaleStateOpen, created.JSON201.State)

	reserve := func(who, key string) *apiclient.ReserveResponse {
		t.Helper()
		one := 1
		r, err := api.ReserveWithResponse(ctx, sale, &apiclient.ReserveParams{IdempotencyKey: key},
			apiclient.ReserveJSONRequestBody{Quantity: &one}, as(testserver.Token(t, who)))
		require.NoError(t, err)
		return r
	}
	first := reserve("alice", "checkout-1")
	require.NotNil(t, first.JSON201, "%d %s", first.StatusCode(), first.Body)
	require.Equal(t, apiclient.ReservationStatePending, first.JSON201.State)
	again := reserve("alice", "checkout-1")
	require.Equal(t, first.Body, again.Body, "a retry with the key is the same answer")
	require.Equal(t, "true", again.HTTPResponse.Header.Get("Idempotent-Replayed"))

	order, err := api.ConfirmWithResponse(ctx, first.JSON201.ReservationId, as(testserver.Token(t, "alice")))
	require.NoError(t, err)
	require.NotNil(t, order.JSON200, "%d %s", order.StatusCode(), order.Body)
	require.NotEmpty(t, order.JSON200.OrderId)

	bob := reserve("bob", "checkout-1")
	require.NotNil(t, bob.JSON201, "%d %s", bob.StatusCode(), bob.Body)
	cancelled, err := api.CancelWithResponse(ctx, bob.JSON201.ReservationId, as(testserver.Token(t, "bob")))
	require.NoError(t, err)
	require.NotNil(t, cancelled.JSON200, "%d %s", cancelled.StatusCode(), cancelled.Body)
	require.Equal(t, apiclient.ReservationStateCancelled, cancelled.JSON200.State)

	carol := reserve("carol", "checkout-1")
	require.NotNil(t, carol.JSON201, "bob's unit is back: %d %s", carol.StatusCode(), carol.Body)
	late := reserve("dave", "checkout-1")
	require.NotNil(t, late.JSON409, "%d %s", late.StatusCode(), late.Body)
	require.Equal(t, apiclient.Reserve409JSONResponseBodyErrorCodeSoldOut, late.JSON409.Error.Code)

	got, err := api.GetSaleWithResponse(ctx, sale, admin)
	require.NoError(t, err)
	require.NotNil(t, got.JSON200, "%d %s", got.StatusCode(), got.Body)
	s := got.JSON200
	require.Equal(t, [4]int{0, 1, 1, 1}, [4]int{s.Available, s.Pending, s.Confirmed, s.Cancelled}, "available, pending, confirmed, cancelled")
	require.Equal(t, apiclient.SaleStateSoldOut, s.State)
}
