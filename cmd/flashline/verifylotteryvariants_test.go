package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// TestVerifyDrawLotteryVariants: verify-draw checks a lottery with
// variants (formula v3) from its transcript alone (--url), each award
// recomputed in rank order, and, with a database, the records against it;
// an award altered in the transcript, or in the database, fails.
func TestVerifyDrawLotteryVariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// A connection is waited for up to a minute, not the 5 s a buyer's role
	// waits: beside the suite's other parallel tests the pool's default
	// wait ran out before the sale's creation (fresh-clone run 38: "create
	// sale: overloaded"), as the handlers tests' store's once did.
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{RoleWait: time.Minute})
	now := time.Now()
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_lv", Admission: flashline.AdmissionLottery,
		Confirmation: flashline.ConfirmByCustomer, PerCustomerLimit: 1,
		Variants: []flashline.NewVariant{{SKU: "S", Stock: 2}, {SKU: "M", Stock: 1}, {SKU: "L", Stock: 2}},
		Lottery: &flashline.LotteryRules{RegistrationOpensAt: now.Add(-time.Minute), RegistrationClosesAt: now.Add(time.Hour),
			DrawAt: now.Add(time.Hour), PurchaseWindowSeconds: 60}})
	require.NoError(t, err)
	choices := []string{"S", "M", "L", ""}
	for i := range 12 {
		_, err := store.Register(ctx, flashline.NewRegistration{SaleID: sale.ID, CustomerID: fmt.Sprintf("cust_%02d", i), Variant: choices[i%4]})
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `UPDATE lotteries SET registration_closes_at = now(), draw_at = now() WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = now() WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	res, err := store.DrawLottery(ctx, sale.ID, nil)
	require.NoError(t, err)
	require.Equal(t, 5, res.Won)

	transcript := func() api.DrawTranscript {
		l, err := store.Lottery(ctx, sale.ID)
		require.NoError(t, err)
		entries, err := store.LotteryEntries(ctx, sale.ID)
		require.NoError(t, err)
		return api.NewDrawTranscript(l, flashline.NewDrawTranscript(l, entries))
	}
	good := transcript()
	require.Equal(t, api.DrawFormulaV3, good.Formula)
	var mu sync.Mutex
	var doc api.DrawTranscript
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	verify := func(d api.DrawTranscript, db string) (string, error) {
		mu.Lock()
		doc = d
		mu.Unlock()
		out, _, err := runCLI(t, db, "sale", "verify-draw", sale.ID, "--url", srv.URL, "--customer", "cust_03")
		return out, err
	}

	out, err := verify(good, "")
	require.NoError(t, err, out)
	require.Contains(t, out, "flashline/lottery/draw/v3")
	require.Contains(t, out, "S 2 of 2, M 1 of 1, L 2 of 2")
	require.Contains(t, out, "The draw checks out")
	out, err = verify(good, dbURL)
	require.NoError(t, err, out)
	require.Contains(t, out, "The records agree with the draw.")

	// An award altered in the transcript: the outcome step fails.
	bad := transcript()
	for i, r := range bad.Registrants {
		if r.Award != "" {
			bad.Registrants[i].Award = map[string]string{"S": "L", "M": "S", "L": "S"}[r.Award]
			break
		}
	}
	out, err = verify(bad, "")
	require.ErrorIs(t, err, errDrawMismatch, out)
	require.Contains(t, out, `the "outcome" step fails`)

	// An award altered in the database: the transcript checks out, the
	// records do not.
	tag, err := pool.Exec(ctx, `UPDATE lottery_registrations SET won_variant = CASE won_variant WHEN 'S' THEN 'L' ELSE 'S' END
		WHERE sale_id = $1 AND variant IS NULL AND won_variant IS NOT NULL
		  AND registration_id = (SELECT registration_id FROM lottery_registrations
		                          WHERE sale_id = $1 AND variant IS NULL AND won_variant IS NOT NULL LIMIT 1)`, sale.ID)
	require.NoError(t, err)
	if tag.RowsAffected() == 0 {
		// No winner named any: alter a named winner's state instead.
		_, err = pool.Exec(ctx, `UPDATE lottery_registrations SET state = 'lost', won_variant = NULL, purchase_window_ends_at = NULL
			WHERE registration_id = (SELECT registration_id FROM lottery_registrations WHERE sale_id = $1 AND state = 'won' LIMIT 1)`, sale.ID)
		require.NoError(t, err)
	}
	out, err = verify(good, dbURL)
	require.ErrorIs(t, err, errDrawMismatch, out)
	require.Contains(t, out, "The draw checks out")
	require.Contains(t, out, "disagree with the draw")
}
