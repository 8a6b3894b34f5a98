package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
)

// TestRepairCorruptedVariant: `flashline sale repair` of a sale with
// variants whose one variant's stock row was changed behind the service's
// back: the plan names each bucket's variant and each variant's total, and
// corrects only that variant's row; --apply writes its 'repair' ledger rows
// and leaves the sale paused; `check` then finds every variant adding up,
// and the sale resumes. (TestRepairCorruptedSale is the same for a sale
// without variants, whose output is unchanged.)
func TestRepairCorruptedVariant(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	pool := newPool(t, dbURL)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "variants.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"sku":"S","stock":3},{"sku":"M","stock":5,"buckets":2},{"sku":"L","stock":4}]`), 0o600))
	out, _, err := runCLI(t, dbURL, "sale", "create", "--sku", "drop-repair", "--variants", "@"+file)
	require.NoError(t, err)
	var sale struct{ SaleID string }
	require.NoError(t, json.Unmarshal([]byte(out), &sale))
	saleID := sale.SaleID

	// M's second row (bucket 64+1, 2 units) gains two.
	_, err = pool.Exec(ctx, `UPDATE stock SET quantity = quantity + 2 WHERE sale_id = $1 AND bucket = 65`, saleID)
	require.NoError(t, err)
	_, _, err = runCLI(t, dbURL, "sale", "pause", saleID)
	require.NoError(t, err)

	out, _, err = runCLI(t, dbURL, "sale", "repair", saleID)
	require.NoError(t, err)
	t.Logf("flashline sale repair:\n%s", out)
	require.Regexp(t, `(?m)^\s*VARIANT\s+BUCKET\s+STOCK ROW`, out)
	require.Regexp(t, `(?m)^\s+S\s+0\s+3\s+3\s+3\s+0\s+3\s+\+0\s+\+0\s*$`, out)
	require.Regexp(t, `(?m)^\s+M\s+64\s+3\s+3\s+3\s+0\s+3\s+\+0\s+\+0\s*$`, out)
	require.Regexp(t, `(?m)^\s+M\s+65\s+4\s+2\s+2\s+0\s+2\s+\+2\s+-2\s*$`, out, "M's second row: 2 unrecorded, corrected by -2")
	require.Regexp(t, `(?m)^\s+M\s+total\s+7\s+5\s+5\s+0\s+5\s+\+2\s+-2\s*$`, out)
	require.Regexp(t, `(?m)^\s+L\s+128\s+4\s+4\s+4\s+0\s+4\s+\+0\s+\+0\s*$`, out)
	require.Regexp(t, `(?m)^\s+total\s+14\s+12\s+12\s+0\s+12\s+\+2\s+-2\s*$`, out)
	require.Contains(t, out, "Nothing written")

	env := map[string]string{"DATABASE_URL": dbURL, "USER": "ops-ana"}
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, []string{"sale", "repair", "--apply", saleID}, func(k string) string { return env[k] }, &stdout, &stderr))
	require.Contains(t, stdout.String(), "Applied by ops-ana")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM stock_ledger WHERE sale_id = $1 AND reason = 'repair' AND bucket = 65`, saleID))
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM stock_ledger WHERE sale_id = $1 AND reason = 'repair'`, saleID), "the other rows untouched")

	check, _, err := runCLI(t, dbURL, "check")
	require.NoError(t, err, "%s", check)
	out, _, err = runCLI(t, dbURL, "sale", "repair", saleID)
	require.NoError(t, err)
	require.Contains(t, out, "Nothing to repair")
	out, _, err = runCLI(t, dbURL, "sale", "resume", saleID)
	require.NoError(t, err)
	require.Contains(t, out, `"state": "open"`)
}
