package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// runCLI calls run in-process with DATABASE_URL set, as a user's shell would.
func runCLI(t *testing.T, dbURL string, args ...string) (string, string, error) {
	t.Helper()
	env := map[string]string{"DATABASE_URL": dbURL, "FLASHLINE_JWT_SECRET": "cli-secret"}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestCLI(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)

	out, _, err := runCLI(t, dbURL, "migrate", "status")
	require.NoError(t, err)
	require.Contains(t, out, "current:          true")

	out, _, err = runCLI(t, dbURL, "sale", "create", "--sku", "sku_cli", "--stock", "5", "--limit", "2")
	require.NoError(t, err)
	var sale struct {
		SaleID    string
		State     string
		Available int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sale))
	require.Equal(t, "open", sale.State)
	require.Equal(t, 5, sale.Available)

	out, _, err = runCLI(t, dbURL, "sale", "pause", sale.SaleID)
	require.NoError(t, err)
	require.Contains(t, out, `"state": "paused"`)

	_, _, err = runCLI(t, dbURL, "sale", "open", sale.SaleID)
	require.ErrorContains(t, err, "cannot make that state change")

	out, _, err = runCLI(t, dbURL, "check")
	require.NoError(t, err)
	require.Contains(t, out, sale.SaleID)
	require.Contains(t, out, "1 sales, 0 mismatched")

	t.Run("CheckMismatchExits1", func(t *testing.T) {
		pool, err := pgxpool.New(context.Background(), dbURL)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		_, err = pool.Exec(context.Background(), `UPDATE stock SET quantity = quantity + 1 WHERE sale_id = $1`, sale.SaleID)
		require.NoError(t, err)
		out, _, err := runCLI(t, dbURL, "check")
		require.ErrorIs(t, err, errMismatch)
		require.Equal(t, 1, exitCode(err))
		require.Contains(t, out, "MISMATCH")
	})

	t.Run("BadInput", func(t *testing.T) {
		for _, args := range [][]string{
			{"sale", "create", "--sku", "x"},   // no stock
			{"sale", "create", "--stock", "5"}, // no sku
			{"sale", "create", "--sku", "x", "--stock", "5", "--opens-at", "tomorrow"},
			{"sale", "create", "--sku", "x", "--stock", "5", "--price-amount", "100"},   // no currency
			{"sale", "create", "--sku", "x", "--stock", "5", "--price-currency", "EUR"}, // no amount
			{"sale", "create", "--sku", "x", "--stock", "5", "--price-amount", "100", "--price-currency", "E1"},
			{"sale", "show"}, // no id
			{"sale", "frobnicate", "x"},
			{"migrate", "down", "zero"},
			{"nonsense"},
		} {
			_, _, err := runCLI(t, dbURL, args...)
			require.Error(t, err, strings.Join(args, " "))
		}
		_, _, err := runCLI(t, dbURL, "sale", "show", "sale_missing")
		require.ErrorContains(t, err, "not found")
	})

	t.Run("CheckShowsWhatTheAPIShows", func(t *testing.T) {
		// A sale stored scheduled whose time has come shows open; an open
		// one with nothing left shows sold_out, as GET /admin/sales does.
		// At least 4 s ahead, in whole seconds: a CLI process that starts
		// slowly on a loaded machine still creates it before it opens.
		soon := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
		out, _, err := runCLI(t, dbURL, "sale", "create", "--sku", "sku_soon", "--stock", "3", "--opens-at", soon.Format(time.RFC3339), "--confirmation", "customer")
		require.NoError(t, err)
		var scheduled struct{ SaleID, State string }
		require.NoError(t, json.Unmarshal([]byte(out), &scheduled))
		require.Equal(t, "scheduled", scheduled.State)
		out, _, err = runCLI(t, dbURL, "sale", "create", "--sku", "sku_one", "--stock", "1", "--confirmation", "customer")
		require.NoError(t, err)
		var one struct{ SaleID string }
		require.NoError(t, json.Unmarshal([]byte(out), &one))
		pool, err := pgxpool.New(context.Background(), dbURL)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		_, err = postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}).Reserve(context.Background(), flashline.ReserveRequest{
			SaleID: one.SaleID, CustomerID: "c1", IdempotencyKey: "k", Quantity: 1, Fingerprint: []byte("f"),
		})
		require.NoError(t, err)
		time.Sleep(time.Until(soon.Add(100 * time.Millisecond)))
		out, _, _ = runCLI(t, dbURL, "check")
		stateOf := func(id string) string {
			for line := range strings.Lines(out) {
				if f := strings.Fields(line); len(f) > 1 && f[0] == id {
					return f[1]
				}
			}
			return ""
		}
		require.Equal(t, "open", stateOf(scheduled.SaleID), "%s", out)
		require.Equal(t, "sold_out", stateOf(one.SaleID), "%s", out)
		require.Contains(t, out, "VOIDED")
	})

	t.Run("Price", func(t *testing.T) {
		out, _, err := runCLI(t, dbURL, "sale", "create", "--sku", "sku_priced", "--stock", "2", "--price-amount", "2500", "--price-currency", "eur")
		require.NoError(t, err)
		require.Contains(t, out, `"amount": 2500`)
		require.Contains(t, out, `"currency": "EUR"`)
	})

	t.Run("SaleShowWithoutAnID", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		env := map[string]string{"DATABASE_URL": dbURL}
		err := run(context.Background(), []string{"sale", "show"}, func(k string) string { return env[k] }, &stdout, &stderr)
		require.ErrorContains(t, err, "give exactly one SALE_ID")
		require.Contains(t, stderr.String(), "usage:", "the usage says what to give")
		require.True(t, strings.HasSuffix(stderr.String(), "\n"))
		require.Empty(t, stdout.String())
		_, _, err = runCLI(t, dbURL, "sale", "show", "")
		require.ErrorContains(t, err, "not found")
	})

	t.Run("Token", func(t *testing.T) {
		out, _, err := runCLI(t, dbURL, "token", "--customer", "alice")
		require.NoError(t, err)
		require.Equal(t, 2, strings.Count(strings.TrimSpace(out), "."))
	})
}

func TestSolve(t *testing.T) {
	t.Parallel()
	out, _, err := runCLI(t, "", "solve", "--nonce", "n0nce-from-a-status-answer", "--bits", "16")
	require.NoError(t, err)
	solution := strings.TrimSpace(out)
	sum := sha256.Sum256([]byte("n0nce-from-a-status-answer:" + solution))
	require.GreaterOrEqual(t, roomtoken.LeadingZeroBits(sum), 16)
	require.Equal(t, roomtoken.Solve("n0nce-from-a-status-answer", 16), solution)

	for _, args := range [][]string{
		{"solve", "--bits", "8"},
		{"solve", "--nonce", "x", "--bits", "33"},
		{"solve", "--nonce", "x", "--bits", "-1"},
		{"solve", "--nonce", strings.Repeat("x", 257), "--bits", "1"},
	} {
		_, _, err := runCLI(t, "", args...)
		require.Error(t, err, "%v", args)
	}
}
