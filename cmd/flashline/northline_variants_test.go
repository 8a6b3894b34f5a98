package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/loadtest"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// retryStormOfVariants is the retry storm on a sale with variants, on the
// instances of the northline checks: the load generator's storm (scenario
// storm, --variants 3) of n.variantCheckouts checkouts spread over the six
// instances by 96 clients, checkout i naming variant v(i mod 3 + 1), 15% of first
// attempts abandoned and retried with the same key, 10% of successes
// retried again. The generator checks that every replay is the first
// answer's bytes, that the checkouts were given as many distinct
// reservations, and that every variant sold exactly its units; here, from
// the database: one reservation per checkout (customer and key), of the
// variant it named, each variant's stock exact and its invariant ok.
func (n northline) retryStormOfVariants(t *testing.T) {
	const variants = 3
	targets := make([]string, len(n.servers))
	for i, s := range n.servers {
		targets[i] = s.URL
	}
	var out strings.Builder
	res, err := loadtest.Run(context.Background(), loadtest.Config{
		Targets:    targets,
		AdminToken: testserver.AdminToken,
		JWTSecret:  testserver.JWTSecret,
		Scenario:   "storm",
		Clients:    96,
		Checkouts:  n.variantCheckouts,
		Variants:   variants,
		Out:        &out,
		Err:        os.Stderr,
		Transport:  n.servers[0].Checked,
	})
	t.Logf("retry storm of %d variants, %d checkouts across %d instances:\n%s", variants, n.variantCheckouts, len(n.servers), out.String())
	require.NoError(t, err)
	require.Equal(t, n.variantCheckouts, res.Reserved)

	ctx := context.Background()
	rows, err := n.pool.Query(ctx, `SELECT r.customer_id, r.idempotency_key, v.sku FROM reservations r
		JOIN sale_variants v ON v.sale_id = r.sale_id AND v.position = r.bucket / 64
		WHERE r.sale_id = $1`, res.SaleID)
	require.NoError(t, err)
	seen := make([]bool, n.variantCheckouts)
	for rows.Next() {
		var customer, key, sku string
		require.NoError(t, rows.Scan(&customer, &key, &sku))
		_, num, ok := strings.Cut(customer, "-storm-")
		require.True(t, ok, "customer %s", customer)
		i, err := strconv.Atoi(num)
		require.NoError(t, err, "customer %s", customer)
		require.Equal(t, fmt.Sprintf("key-%d", i), key, "checkout %d", i)
		require.False(t, seen[i], "checkout %d holds two reservations", i)
		seen[i] = true
		require.Equal(t, fmt.Sprintf("v%d", i%variants+1), sku, "checkout %d", i)
	}
	require.NoError(t, rows.Err())
	for i, ok := range seen {
		require.True(t, ok, "checkout %d holds no reservation", i)
	}

	vrows, err := n.pool.Query(ctx, `SELECT sku, available, pending + confirmed, ok FROM sale_variant_invariant
		WHERE sale_id = $1 ORDER BY position`, res.SaleID)
	require.NoError(t, err)
	var got []string
	for vrows.Next() {
		var sku string
		var available, held int
		var ok bool
		require.NoError(t, vrows.Scan(&sku, &available, &held, &ok))
		require.True(t, ok, "the invariant of variant %s", sku)
		got = append(got, fmt.Sprintf("%s %d/%d", sku, available, held))
	}
	require.NoError(t, vrows.Err())
	var want []string
	for j := range variants { // the generator's split: as even as can be
		want = append(want, fmt.Sprintf("v%d 0/%d", j+1, n.variantCheckouts/variants+min(1, max(0, n.variantCheckouts%variants-j))))
	}
	require.Equal(t, want, got, "each variant: available/held")
	requireStock(t, n.pool, res.SaleID, 0, n.variantCheckouts)
}
