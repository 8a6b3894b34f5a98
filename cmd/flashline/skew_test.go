package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestSkewedClocksJudgeByTheDatabase is the fault harness's clock-skew
// finding (internal/testkit/chaos, fault "clock-skew"), on two instances whose
// clocks are 90 s ahead and 90 s behind (serve's FLASHLINE_TEST_CLOCK_SKEW
// test hook):
//   - a direct sale opening in 3 s, created on the fast instance, was stored
//     open at once and sold before its opening (the instance judged the
//     opening time by its own clock);
//   - the slow instance answered sale_not_open from memory for 90 s after
//     the opening (the sale cache's opening judgment);
//   - an admission token minted on the slow instance was expired already on
//     the fast one (403 admission_invalid).
//
// Every one of these now compares times with the database's clock (the sale
// cache's estimate of it, or now() itself).
func TestSkewedClocksJudgeByTheDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	ctx := context.Background()
	dbURL := testdb.New(t)
	fast := testserver.StartEnv(t, dbURL, []string{"FLASHLINE_TEST_CLOCK_SKEW=90s"})
	slow := testserver.StartEnv(t, dbURL, []string{"FLASHLINE_TEST_CLOCK_SKEW=-90s"})
	require.Contains(t, fast.Logs(), "TEST HOOK")
	c := testserver.NewClient()
	buy := func(s *testserver.Server, sale, customer, admission string) client.Result[client.Reservation] {
		t.Helper()
		r, err := c.To(s.URL).Reserve(ctx, testserver.Token(t, customer), client.ReserveRequest{
			SaleID: sale, IdempotencyKey: "k-" + customer, Quantity: 1, AdmissionToken: admission})
		require.NoError(t, err)
		return r
	}

	opensAt := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	created, err := c.To(fast.URL).CreateSale(ctx, testserver.AdminToken, client.NewSale{SKU: "skew", InitialStock: 10, OpensAt: &opensAt})
	require.NoError(t, err)
	require.Equal(t, "scheduled", created.Value.State, "a sale opening in the future is not open, whatever the clock of the instance that made it")
	sale := created.Value.SaleID
	r := buy(fast, sale, "early", "")
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	require.Equal(t, "sale_not_open", r.Code())

	time.Sleep(time.Until(opensAt) + 1500*time.Millisecond) // and a cache refresh
	r = buy(slow, sale, "late", "")
	require.Equal(t, http.StatusCreated, r.Status, "the slow instance sells once the database says the sale is open: %s", r.Body)

	// A waiting room: ticket and admission on the slow instance, the
	// reservation on the fast one.
	room, err := c.To(fast.URL).CreateSale(ctx, testserver.AdminToken, client.NewSale{SKU: "skew-room", InitialStock: 10, Admission: "waiting_room"})
	require.NoError(t, err)
	_, err = c.To(fast.URL).OpenSale(ctx, testserver.AdminToken, room.Value.SaleID)
	require.NoError(t, err)
	jwt := testserver.Token(t, "waiter")
	var admission string
	tk, err := c.To(slow.URL).Ticket(ctx, jwt, room.Value.SaleID, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, tk.Status, "%s", tk.Body)
	require.Eventually(t, func() bool {
		st, err := c.To(slow.URL).Status(ctx, jwt, room.Value.SaleID, tk.Value.Token, "")
		admission = st.Value.AdmissionToken
		return err == nil && st.Value.State == "admitted"
	}, 20*time.Second, 200*time.Millisecond)
	r = buy(fast, room.Value.SaleID, "waiter", admission)
	require.Equal(t, http.StatusCreated, r.Status, "an admission token minted on the slow instance is good on the fast one: %s", r.Body)
}

// TestClockSkewIgnoredOutsideTestBuilds: serve honoured FLASHLINE_TEST_CLOCK_SKEW
// in any binary, so a variable left in a production environment shifted the
// clock tickets and admission tokens are judged by. Only a binary built with
// the tag flashline_testhooks (as internal/testkit/testserver builds) honours it now;
// any other says it ignores it. This test binary is built without the tag.
func TestClockSkewIgnoredOutsideTestBuilds(t *testing.T) {
	t.Parallel()
	t.Run("IgnoredWithAWarning", func(t *testing.T) {
		t.Parallel()
		if testHooks {
			t.Skip("built with -tags flashline_testhooks")
		}
		// No admin token: serve stops after reading the hook, before it
		// opens anything.
		env := map[string]string{clockSkewEnv: "90s", "FLASHLINE_JWT_SECRET": strings.Repeat("j", 32)}
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, io.Discard, &stderr)
		require.ErrorContains(t, err, "FLASHLINE_ADMIN_TOKEN")
		require.Contains(t, stderr.String(), "flashline: FLASHLINE_TEST_CLOCK_SKEW is ignored")
		skew, err := readClockSkew(func(k string) string { return env[k] }, testHooks, io.Discard)
		require.NoError(t, err)
		require.Zero(t, skew)
	})
	t.Run("HonouredInTestBuilds", func(t *testing.T) {
		t.Parallel()
		var stderr bytes.Buffer
		skew, err := readClockSkew(func(k string) string { return map[string]string{clockSkewEnv: "-90s"}[k] }, true, &stderr)
		require.NoError(t, err)
		require.Equal(t, -90*time.Second, skew)
		require.Empty(t, stderr.String())
	})
}
